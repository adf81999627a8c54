# Cython declarations for _parse.py (an "augmenting" .pxd): the builder as a cdef class
# with typed state, for the compiled build. The .py file stays plain Python; keep the
# two in step.
cimport cython

cdef int _K_TEXT, _K_BOS, _K_SYSTEM_START, _K_SYSTEM_END, _K_DEVELOPER_START
cdef int _K_DEVELOPER_END, _K_USER_START, _K_USER_END, _K_ASSISTANT_START
cdef int _K_ASSISTANT_END, _K_INNER_PREFIX, _K_INNER_SUFFIX, _K_TOOLS_PREFIX
cdef int _K_TOOLS_SUFFIX, _K_TOOL_OUTPUT_START, _K_TOOL_OUTPUT_END, _K_IMAGE, _K_AUDIO
cdef int _K_THINK_START, _K_THINK_END

cdef bint _COMPILED
cdef Py_ssize_t _json_end(str s, Py_ssize_t pos, dict memo=*) except -2
@cython.locals(c=Py_UCS4)
cdef Py_ssize_t _json_ws(str s, Py_ssize_t i, Py_ssize_t n) except -2
@cython.locals(c=Py_UCS4, j=Py_ssize_t)
cdef Py_ssize_t _json_string_end(str s, Py_ssize_t i, Py_ssize_t n) except -2
@cython.locals(start=Py_ssize_t, c=Py_UCS4, digits=Py_ssize_t, is_float=bint, e=Py_ssize_t,
               limit=Py_ssize_t)
cdef Py_ssize_t _json_number_end(str s, Py_ssize_t i, Py_ssize_t n) except -2
cdef str _json_word(Py_UCS4 c)
@cython.locals(starts=list, end=Py_ssize_t, start=Py_ssize_t)
cdef Py_ssize_t _json_skip(str s, Py_ssize_t pos, dict memo=*) except -2
@cython.locals(n=Py_ssize_t, i=Py_ssize_t, c=Py_UCS4, stack=list, start=Py_ssize_t)
cdef Py_ssize_t _json_scan(str s, Py_ssize_t pos, dict memo, list starts) except -2
cdef Py_ssize_t _json_key(str s, Py_ssize_t i, Py_ssize_t n) except -2
@cython.locals(pos=Py_ssize_t, n=Py_ssize_t, end=Py_ssize_t, close=Py_ssize_t)
cdef tuple _output_group(str run)
@cython.locals(calls=list, pos=Py_ssize_t, last=Py_ssize_t, colon=Py_ssize_t,
               args_start=Py_ssize_t, end=Py_ssize_t, nxt=Py_ssize_t, args_end=Py_ssize_t,
               memo=dict)
cdef tuple _read_calls(str body)
@cython.locals(calls=list, n=Py_ssize_t, pos=Py_ssize_t, start=Py_ssize_t, end=Py_ssize_t,
               nxt=Py_ssize_t, memo=dict)
cdef tuple _salvage(str raw)
@cython.locals(call=tuple, args=str, n=Py_ssize_t, end=Py_ssize_t)
cdef bint _all_json(list calls) except -1
@cython.locals(best=Py_ssize_t, m=Py_ssize_t, k=Py_ssize_t)
cdef Py_ssize_t _shared_prefix(str s, str a, str b) except -1

cdef class _Builder:
    cdef public str text
    cdef object d
    cdef bint strict
    cdef public str format
    cdef const long long[::1] ev
    cdef Py_ssize_t n, i
    cdef public list warnings
    cdef bint waiting, no_header
    cdef public Py_ssize_t group_end
    cdef public list messages
    cdef object lines

    cdef _lines(self)
    cdef int kind(self, Py_ssize_t j) except -1
    cdef Py_ssize_t start(self, Py_ssize_t j) except -1
    cdef Py_ssize_t end(self, Py_ssize_t j) except -1
    @cython.locals(j=Py_ssize_t, k=cython.longlong)
    cpdef bint _has_reasoning(self) except -1
    cdef error(self, Py_ssize_t j, str reason, str expected=*, Py_ssize_t at=*)
    cdef recover(self, Py_ssize_t j, str reason, str expected=*, Py_ssize_t at=*)
    @cython.locals(k=int)
    cdef bint textual(self, Py_ssize_t j, bint in_user=*) except -1
    @cython.locals(start=Py_ssize_t)
    cdef tuple take_text(self, Py_ssize_t j, object limit=*)
    cdef bint expect(self, int kind, str what) except -1
    cpdef build(self)
    cdef header(self, result)
    cdef system(self, str system, result)
    @cython.locals(base=Py_ssize_t)
    cdef developer(self, str dev, Py_ssize_t first, Py_ssize_t stop, result)
    @cython.locals(n=Py_ssize_t, k=int)
    cdef turns(self, result)
    @cython.locals(n=Py_ssize_t, at_end=bint)
    cdef after_turn(self, bint closed, result)
    @cython.locals(n=Py_ssize_t, k=int, has_media=bint, start_j=Py_ssize_t)
    cdef user_turn(self)
    @cython.locals(start=Py_ssize_t)
    cdef tuple _user_text(self, Py_ssize_t j)
    @cython.locals(n=Py_ssize_t, a=Py_ssize_t, b=Py_ssize_t, k=int)
    cdef bint assistant_turn(self) except -1
    @cython.locals(body_start=Py_ssize_t, k=Py_ssize_t, nxt=Py_ssize_t, suffix_ok=bint)
    cdef tuple tool_calls(self, Py_ssize_t j, Py_ssize_t b)
    @cython.locals(k=Py_ssize_t)
    cdef tuple output_group(self, Py_ssize_t j, Py_ssize_t b)
    @cython.locals(cut=Py_ssize_t, close=Py_ssize_t)
    cdef tuple leading_outputs(self, str run, Py_ssize_t at, bint possible)
    @cython.locals(brackets=bint, in_inner=bint, after_calls=bint, j=Py_ssize_t, k=int,
                   nxt=Py_ssize_t, msgs=list, blocks=list, at=Py_ssize_t)
    cdef blocks_body(self, Py_ssize_t a, Py_ssize_t b)
    @cython.locals(brackets=bint, after_calls=bint, j=Py_ssize_t, k=int, out=list, at=Py_ssize_t)
    cdef string_body(self, Py_ssize_t a, Py_ssize_t b)
