/* build(cls, *items): an instance of the tuple subclass ``cls`` holding ``items``.
 *
 * The engine builds a few NamedTuples (state, seat, events) on every turn.
 * ``tuple.__new__(cls, items)`` goes through a wrapper that packs, slices and
 * copies argument tuples: about 80 ns each. This allocates the instance once
 * and fills it, like tuple's own constructor does for a subclass: about 20 ns.
 * ``arena/engine/records.py`` falls back to tuple.__new__ when this is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
build(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyType_Check(args[0])
            || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "build(cls, *items): cls must be a tuple type");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t n = nargs - 1;
    PyObject *record = type->tp_alloc(type, n);
    if (record == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(args[i + 1]);
        PyTuple_SET_ITEM(record, i, args[i + 1]);
    }
    return record;
}

static PyMethodDef methods[] = {
    {"build", (PyCFunction)(void (*)(void))build, METH_FASTCALL,
     "build(cls, *items): an instance of the tuple subclass cls holding items."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "arena.engine._records", NULL, 0, methods,
};

PyMODINIT_FUNC
PyInit__records(void)
{
    return PyModuleDef_Init(&module);
}
