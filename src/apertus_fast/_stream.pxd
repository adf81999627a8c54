# Cython declarations for _stream.py (an "augmenting" .pxd): the call-list reader and
# the stream parser as cdef classes, whose attributes are struct fields instead of
# entries of an instance dict, for the compiled build. The .py file stays plain Python;
# keep the two in step (every attribute a method assigns is declared here). Both pickle
# through their __getstate__ / __setstate__, so that a stream pickled by one build
# continues in the other.
cimport cython


@cython.auto_pickle(False)   # (its own __getstate__ / __setstate__, as in the pure build)
cdef class _Calls:
    cdef public object parts, starts, n, phase, k, opened, call_start, args_start
    cdef public object scanned, sep, sep_from, end, part, watch, events, finished, mismatch


@cython.auto_pickle(False)   # (its own __getstate__ / __setstate__)
cdef class StreamParser:
    cdef public object dialect, format
    cdef public object _brackets, _core, _table, _tail, _base, _run, _chunks, _at
    cdef public object _emit_from, _type, _decoder, _bytes_in, _closed, _call_id, _mode
    cdef public object _inner, _after_calls, _waiting, _astart, _ended, _calls, _calls_at
    cdef public object _calls_no, _group, _group_at, _held, _held_at, _held_n, _held_items
    cdef public object _held_pos, _held_watch, _held_wait, _prompt_closed_group, _out
    cdef public object _reasoning, _content, _tool_calls, _call_index, _names, _outputs
    cdef public object _warnings, _closed_inner
    # as a plain class has them: a subclass's own attributes, weak references
    cdef dict __dict__
    cdef object __weakref__
