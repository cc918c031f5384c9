/* ask(fd_in, line, fd_out, others, timeout, max_line, room): the usual decision's round trip
 * with a bot, in one call and one release of the interpreter's lock.
 *
 * Writes ``line`` and a newline to the bot's stdin, waits (``poll``) at most ``timeout`` seconds
 * (a float, as every time in the shell: rounded up to poll's milliseconds here) for
 * its stdout and every fd in ``others`` (the thread's hub: the other bots' stderr, its own, the
 * wake pipe), and reads once. A decision costs a write, a poll and a read; written in Python
 * around the same three calls, the bookkeeping of the usual case cost more than the calls.
 *
 * It answers only the usual case and hands everything else to the shell's general loop
 * (arena/bots/blocking.py), which follows the bot's Conversation and so holds every limit:
 *
 *   str    the reply: the whole read was one line of printable-or-not ASCII ending in "\n",
 *          no "\r", at most ``max_line`` bytes before the newline and, with it, at most
 *          ``room`` bytes (what the bot may still write to stdout);
 *   bytes  what the read gave otherwise (b"" at the end of the stream, or when the read
 *          failed): the shell feeds it to the channel, which decides (a part line, two lines,
 *          non-ASCII, a line over its limit, the output over its cap, the end);
 *   int    the line was not written whole: the bytes that were (0 if none, or if the write
 *          failed); the shell writes the rest under its send deadline, then waits;
 *   None   written, nothing read: the time is up, or another of the fds is ready (``poll`` is
 *          level-triggered: the shell's own ``poll`` sees it again), or the read would block.
 *
 * A line holding "\n" or "\r" raises ValueError, as ``channel.encode_line`` does.
 *
 * Knob(fd, on, off): a control file kept open (a cgroup's freezer), written ``on`` or ``off``
 * by calling it with a truth value; True if the write took it whole, False if not, or once
 * closed. The referee freezes a seat after each answer and thaws it before each request: as
 * ``os.write`` behind a Python method that cost some 1.5k instructions a call, this costs a
 * few hundred (most of them releasing the interpreter's lock around the write, which a busy
 * cgroup lock can make wait). It owns ``fd``: ``close()`` (or its end) closes it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define READ_BYTES (16 * 1024) /* one read, on the stack (a longer reply goes on in the shell) */
#define MAX_FDS 64             /* more fds than this in a hub: not the usual case, the shell waits */

/* An int argument as a C int (-1 with an exception set if it is none, or out of range). */
static int
as_int(PyObject *value)
{
    long v = PyLong_AsLong(value);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a file descriptor out of range");
        return -1;
    }
    return (int)v;
}

/* Seconds as poll's milliseconds, rounded up (a wait never ends before its time); 0 for none. */
static int
poll_ms(double seconds)
{
    double ms = seconds * 1000.0;
    if (!(ms > 0.0)) { /* (NaN too) */
        return 0;
    }
    if (ms >= (double)INT_MAX) {
        return INT_MAX;
    }
    int whole = (int)ms;
    return whole < ms ? whole + 1 : whole;
}

static PyObject *
ask(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyBytes_CheckExact(args[1]) || !PyTuple_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "ask(fd_in, line: bytes, fd_out, others: tuple, timeout, max_line, room)");
        return NULL;
    }
    int fd_in = as_int(args[0]);
    int fd_out = as_int(args[2]);
    double timeout = PyFloat_AsDouble(args[4]); /* seconds */
    Py_ssize_t max_line = PyLong_AsSsize_t(args[5]);
    Py_ssize_t room = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    const char *line = PyBytes_AS_STRING(args[1]);
    Py_ssize_t len = PyBytes_GET_SIZE(args[1]);
    if (memchr(line, '\n', (size_t)len) != NULL || memchr(line, '\r', (size_t)len) != NULL) {
        PyErr_SetString(PyExc_ValueError, "a protocol line must not contain newlines");
        return NULL;
    }
    struct pollfd fds[MAX_FDS + 1];
    Py_ssize_t n_others = PyTuple_GET_SIZE(args[3]);
    int poll_all = n_others < MAX_FDS;
    nfds_t nfds = 1;
    fds[0].fd = fd_out;
    fds[0].events = POLLIN;
    if (poll_all) {
        for (Py_ssize_t i = 0; i < n_others; i++) {
            int fd = as_int(PyTuple_GET_ITEM(args[3], i));
            if (fd == -1 && PyErr_Occurred()) {
                return NULL;
            }
            fds[nfds].fd = fd;
            fds[nfds].events = POLLIN;
            nfds++;
        }
    }
    char buf[READ_BYTES];
    struct iovec out[2] = {{(void *)line, (size_t)len}, {"\n", 1}};
    ssize_t written, got = -1;
    int ready = 0, others_ready = 0;
    Py_BEGIN_ALLOW_THREADS
    written = writev(fd_in, out, 2);
    if (written == len + 1 && poll_all) {
        ready = poll(fds, nfds, poll_ms(timeout));
        if (ready > 0) {
            for (nfds_t i = 1; i < nfds; i++) {
                others_ready |= fds[i].revents != 0;
            }
            if (!others_ready && fds[0].revents != 0) {
                got = read(fd_out, buf, READ_BYTES);
                if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                    got = 0; /* a torn pipe is the end of the stream (process.py's _feed_stdout) */
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (written != len + 1) {
        result = PyLong_FromSsize_t(written < 0 ? 0 : written);
    }
    else if (got < 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        int usual = got >= 1 && got - 1 <= max_line && got <= room && buf[got - 1] == '\n';
        for (ssize_t i = 0; usual && i < got - 1; i++) {
            unsigned char c = (unsigned char)buf[i];
            usual = c < 0x80 && c != '\n' && c != '\r';
        }
        result = usual ? PyUnicode_DecodeASCII(buf, got - 1, NULL) : PyBytes_FromStringAndSize(buf, got);
    }
    return result;
}

/* Knob: see the module's text. */
#define KNOB_VALUE 16 /* the longest value a knob writes ("FROZEN", "THAWED", "0", "1") */

typedef struct {
    PyObject_HEAD
    int fd; /* -1 once closed */
    Py_ssize_t on_len, off_len;
    char on[KNOB_VALUE], off[KNOB_VALUE];
    vectorcallfunc vectorcall;
} Knob;

static PyObject *
knob_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Knob *knob = (Knob *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a knob is called with one truth value");
        return NULL;
    }
    int on = PyObject_IsTrue(args[0]);
    if (on < 0) {
        return NULL;
    }
    if (knob->fd < 0) {
        Py_RETURN_FALSE;
    }
    const char *value = on ? knob->on : knob->off;
    Py_ssize_t len = on ? knob->on_len : knob->off_len;
    ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    do {
        written = write(knob->fd, value, (size_t)len);
    } while (written < 0 && errno == EINTR);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(written == len);
}

static PyObject *
knob_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    int fd;
    const char *on, *off;
    Py_ssize_t on_len, off_len;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Knob(fd, on, off) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "iy#y#:Knob", &fd, &on, &on_len, &off, &off_len)) {
        return NULL;
    }
    if (fd < 0 || on_len > KNOB_VALUE || off_len > KNOB_VALUE) {
        PyErr_SetString(PyExc_ValueError, "Knob(fd, on, off): a file descriptor, and values of at most 16 bytes");
        return NULL;
    }
    Knob *knob = (Knob *)type->tp_alloc(type, 0);
    if (knob == NULL) {
        return NULL;
    }
    knob->fd = fd;
    memcpy(knob->on, on, (size_t)on_len);
    memcpy(knob->off, off, (size_t)off_len);
    knob->on_len = on_len;
    knob->off_len = off_len;
    knob->vectorcall = knob_call;
    return (PyObject *)knob;
}

static PyObject *
knob_close(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    Knob *knob = (Knob *)self;
    if (knob->fd >= 0) {
        int fd = knob->fd;
        knob->fd = -1;
        if (close(fd) < 0 && errno != EINTR) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    Py_RETURN_NONE;
}

static PyObject *
knob_closed(PyObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((Knob *)self)->fd < 0);
}

static void
knob_dealloc(PyObject *self)
{
    Knob *knob = (Knob *)self;
    if (knob->fd >= 0) {
        close(knob->fd);
    }
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef knob_methods[] = {
    {"close", knob_close, METH_NOARGS, "Close the file (idempotent); the knob then writes nothing and says False."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef knob_getset[] = {
    {"closed", knob_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KnobType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "arena.bots._pipe.Knob",
    .tp_doc = "Knob(fd, on, off): knob(truth) writes on or off to fd, True if whole; it owns fd (see close).",
    .tp_basicsize = sizeof(Knob),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Knob, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = knob_new,
    .tp_dealloc = knob_dealloc,
    .tp_methods = knob_methods,
    .tp_getset = knob_getset,
};

static PyMethodDef methods[] = {
    {"ask", (PyCFunction)(void (*)(void))ask, METH_FASTCALL,
     "ask(fd_in, line, fd_out, others, timeout, max_line, room): the reply line (str), what was read "
     "otherwise (bytes), the bytes written of a line not written whole (int), or None: see the module's text."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *mod)
{
    if (PyType_Ready(&KnobType) < 0) {
        return -1;
    }
    Py_INCREF(&KnobType);
    if (PyModule_AddObject(mod, "Knob", (PyObject *)&KnobType) < 0) {
        Py_DECREF(&KnobType);
        return -1;
    }
    /* The interface (arena/bots/native.py:API): raised with any change of a signature here. */
    return PyModule_AddIntConstant(mod, "API", 2);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "arena.bots._pipe", NULL, 0, methods, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__pipe(void)
{
    return PyModuleDef_Init(&module);
}
