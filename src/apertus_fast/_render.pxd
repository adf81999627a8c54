# Cython declarations for _render.py (an "augmenting" .pxd): C types and inlining
# for the compiled build. The .py file stays plain Python; keep the two in step.
cimport cython

@cython.locals(d=dict)
cdef object attr(object obj, str name)
cdef object _attr_slow(object obj, str name)
@cython.locals(d=dict)
cdef object item(object obj, str key)
@cython.locals(seq_=list)
cdef object item0(object obj)
cdef str text(object x)
cdef object cat(object left, object x, object field)
cdef list seq(object x, object field=*)
cdef bint is_mapping(object x) except -1
cdef bint is_iterable(object x) except -1
cpdef str tojson(object x, bint jinja_builtin)
cdef bint not_in(object name, object container) except -1

cdef str ts_type(object spec, bint trim, bint jinja_json, Py_ssize_t depth=*)
cdef str _ts_array(object spec, bint trim, bint jinja_json, Py_ssize_t depth)
@cython.locals(last=Py_ssize_t, i=Py_ssize_t, parts=list, entries=list)
cdef str _ts_object(object spec, bint trim, bint jinja_json, Py_ssize_t depth)
@cython.locals(last=Py_ssize_t, i=Py_ssize_t, parts=list, variants=list)
cdef str _ts_one_of(object one_of, bint trim, bint jinja_json, Py_ssize_t depth)
cdef list _items(object x)
cdef bint _cacheable(object x, int depth) except -1
cdef object _unwrap_tool(object tool, bint native)
@cython.locals(last_tool=Py_ssize_t, ti=Py_ssize_t, out=list, tool_list=list, mode=int)
cdef str _render_tools(object tools, bint trim, bint jinja_json, bint native)
@cython.locals(last=Py_ssize_t, i=Py_ssize_t, out=list, entries=list)
cpdef str _render_tool(object tool, bint trim, bint jinja_json, bint native)

cpdef str render_date(object date=*)
cdef tuple _system_prompt(object messages, object d, object date, bint look)
cdef _model(list out, object marks, bint on)
@cython.locals(in_assistant=bint, in_tool=bint, in_inner=bint, waiting=bint, fmt=int,
               n=Py_ssize_t, i=Py_ssize_t, first=bint, openai_shapes=bint,
               tout_open=str, tout_close=str)
cdef _render_messages(object messages, Py_ssize_t start, object d, list out,
                      object continue_assistant_message, object marks)
cdef bint _truth(object flag, str name) except -1
cdef _user(object content, object d, list out)
cdef _user_parts(object parts, object d, list out)
cdef bint _is_display_answers(object calls) except -1
@cython.locals(parts=list)
cdef str _block_calls(object calls, bint openai_shapes)
@cython.locals(parts=list)
cdef str _legacy_calls(object calls, bint openai_shapes)
