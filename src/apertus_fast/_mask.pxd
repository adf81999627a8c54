# Cython declarations for _mask.py (an "augmenting" .pxd): the loop of token_mask in C
# integers, for the compiled build. The .py file stays plain Python; keep the two in
# step. Indexing stays checked (the module's header): unpacking a pair that is not a
# tuple or list runs its code, which could change the list of offsets.
cimport cython

@cython.locals(n=Py_ssize_t, count=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, last=Py_ssize_t,
               start=Py_ssize_t, end=Py_ssize_t, k_start=Py_ssize_t, k_end=Py_ssize_t,
               starts=list, ends=list, mask=list, check=bint, read=dict)
cpdef list token_mask(spans, offsets)
