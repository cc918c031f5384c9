/* encode(state, seat, pile_top, cards): a seat's view as the JSON bytes orjson writes for
 * ``views.seat_view(state, seat)``, or None for a state it does not handle; and
 * encode_actions(actions, cards): the actions a request offers, ``[{"id": i, **action_json(a)}]``.
 *
 * Every request a bot is sent carries its view. Building the view's dicts and lists only to
 * encode them once was the largest part of the referee's work per decision; this writes the
 * same bytes straight from the state's tuples. ``pile_top`` is the JSON of the view's
 * ``pile_top`` and ``cards`` a tuple of each card number's JSON, both from ``views.py``, so
 * the names of things live there only. Anything unexpected (a field of another type, a card
 * out of the table, a string that would need escaping) returns None, and ``views.py``
 * encodes the dicts instead: the result is the same either way, only slower.
 * ``tests/test_referee_core_lines.py`` holds the bytes to ``orjson.dumps(seat_view(...))``.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* The fields of State and Seat (arena/engine/model.py) by position. */
enum { ST_SEATS = 1, ST_STOCK, ST_PILE, ST_BURNED, ST_SET_ASIDE, ST_TO_MOVE, ST_DIRECTION, ST_PHASE,
       ST_TURN, ST_STALE, ST_NEED, ST_DESCENDING, ST_FIELDS = 16 };
enum { SE_HAND, SE_FACE_UP, SE_FACE_DOWN, SE_KNOWN, SE_PLACE, SE_FORFEIT, SE_FIELDS = 7 };

typedef struct {
    char *data; /* `first` (on the stack) until the view outgrows it, then the heap's */
    char *first;
    Py_ssize_t len, cap;
    int failed; /* 1: not handled here (the caller falls back), -1: out of memory */
} Buf;

static void grow_and_put(Buf *b, const char *s, Py_ssize_t n);

/* Append n bytes (most are a few: a card, a key; a literal's copy is a move or two); the rare
 * growth is out of line. */
static inline void put(Buf *b, const char *s, Py_ssize_t n)
{
    if (b->len + n <= b->cap) {
        memcpy(b->data + b->len, s, (size_t)n);
        b->len += n;
        return;
    }
    grow_and_put(b, s, n);
}

static void grow_and_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (b->failed) {
        return;
    }
    Py_ssize_t cap = b->cap * 2 > b->len + n ? b->cap * 2 : b->len + n + 256;
    char *grown = b->data == b->first ? PyMem_Malloc(cap) : PyMem_Realloc(b->data, cap);
    if (grown == NULL) {
        b->failed = -1;
        return;
    }
    if (b->data == b->first) {
        memcpy(grown, b->first, b->len);
    }
    b->data = grown;
    b->cap = cap;
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

#define PUT(b, lit) put((b), (lit), (Py_ssize_t)sizeof(lit) - 1)

static void put_long(Buf *b, long v)
{
    char digits[24];
    int i = sizeof(digits);
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        digits[--i] = '-';
    }
    put(b, digits + i, (Py_ssize_t)sizeof(digits) - i);
}

static void put_int(Buf *b, PyObject *o)
{
    if (!PyLong_CheckExact(o)) {
        b->failed = 1;
        return;
    }
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        b->failed = 1;
        return;
    }
    put_long(b, v);
}

static void put_bool(Buf *b, PyObject *o)
{
    if (o == Py_True) {
        PUT(b, "true");
    } else if (o == Py_False) {
        PUT(b, "false");
    } else {
        b->failed = 1;
    }
}

/* A string JSON writes as it is: printable ASCII without quote or backslash; else not handled. */
static void put_text(Buf *b, PyObject *o)
{
    if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_ASCII(o)) {
        b->failed = 1;
        return;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(o);
    const char *s = (const char *)PyUnicode_1BYTE_DATA(o);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\' || s[i] == 0x7f) {
            b->failed = 1;
            return;
        }
    }
    PUT(b, "\"");
    put(b, s, n);
    PUT(b, "\"");
}

static void put_bytes(Buf *b, PyObject *o)
{
    if (!PyBytes_CheckExact(o)) {
        b->failed = 1;
        return;
    }
    put(b, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
}

/* A card's number, or -1 for anything that is not a small non-negative int. A view holds dozens
 * of cards, so CPython 3.11's one-digit ints are read in place rather than through PyLong_AsLong. */
static inline long card_number(PyObject *c)
{
    if (!PyLong_CheckExact(c)) {
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000 && !defined(Py_LIMITED_API)
    Py_ssize_t size = Py_SIZE(c);
    if (size == 1) {
        return (long)((PyLongObject *)c)->ob_digit[0];
    }
    if (size == 0) {
        return 0;
    }
    return -1;
#else
    long v = PyLong_AsLong(c);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
    }
    return v < 0 ? -1 : v;
#endif
}

static void put_cards(Buf *b, PyObject *cards, PyObject *table)
{
    if (!PyTuple_CheckExact(cards)) {
        b->failed = 1;
        return;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(cards), known = PyTuple_GET_SIZE(table);
    PUT(b, "[");
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = card_number(PyTuple_GET_ITEM(cards, i));
        PyObject *name = v >= 0 && v < known ? PyTuple_GET_ITEM(table, v) : NULL;
        if (name == NULL || !PyBytes_CheckExact(name)) {
            b->failed = 1;
            return;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(name);
        if (size == 4 && b->len + 5 <= b->cap) { /* every card's name: '"7H"', and a comma */
            char *to = b->data + b->len;
            to[0] = ',';
            memcpy(to + (i == 0 ? 0 : 1), PyBytes_AS_STRING(name), 4);
            b->len += i == 0 ? 4 : 5;
            continue;
        }
        if (i) {
            PUT(b, ",");
        }
        put(b, PyBytes_AS_STRING(name), size);
    }
    PUT(b, "]");
}

static void put_stacks(Buf *b, PyObject *stacks, PyObject *table)
{
    if (!PyTuple_CheckExact(stacks)) {
        b->failed = 1;
        return;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(stacks);
    PUT(b, "[");
    for (Py_ssize_t i = 0; i < n && !b->failed; i++) {
        if (i) {
            PUT(b, ",");
        }
        put_cards(b, PyTuple_GET_ITEM(stacks, i), table);
    }
    PUT(b, "]");
}

static void put_face_down(Buf *b, PyObject *face_down)
{
    if (!PyTuple_CheckExact(face_down)) {
        b->failed = 1;
        return;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(face_down);
    PUT(b, "[");
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) {
            PUT(b, ",");
        }
        if (PyTuple_GET_ITEM(face_down, i) == Py_None) {
            PUT(b, "false");
        } else {
            PUT(b, "true");
        }
    }
    PUT(b, "]");
}

static void put_len(Buf *b, PyObject *o)
{
    if (!PyTuple_CheckExact(o)) {
        b->failed = 1;
        return;
    }
    put_long(b, (long)PyTuple_GET_SIZE(o));
}

/* A tuple subclass (a NamedTuple) with at least n fields. */
static int record(PyObject *o, Py_ssize_t n)
{
    return PyTuple_Check(o) && PyTuple_GET_SIZE(o) >= n;
}

static void put_view(Buf *b, PyObject *state, long seat, PyObject *top, PyObject *table)
{
    PyObject *seats = PyTuple_GET_ITEM(state, ST_SEATS);
    if (!PyTuple_CheckExact(seats) || seat < 0 || seat >= PyTuple_GET_SIZE(seats)) {
        b->failed = 1;
        return;
    }
    Py_ssize_t players = PyTuple_GET_SIZE(seats);
    for (Py_ssize_t i = 0; i < players; i++) {
        if (!record(PyTuple_GET_ITEM(seats, i), SE_FIELDS)) {
            b->failed = 1;
            return;
        }
    }
    PyObject *phase = PyTuple_GET_ITEM(state, ST_PHASE);
    int setup = PyUnicode_Check(phase) && PyUnicode_CompareWithASCIIString(phase, "setup") == 0;
    PyObject *me = PyTuple_GET_ITEM(seats, seat);

    PUT(b, "{\"seat\":");
    put_long(b, seat);
    PUT(b, ",\"phase\":");
    put_text(b, phase);
    PUT(b, ",\"to_move\":");
    put_int(b, PyTuple_GET_ITEM(state, ST_TO_MOVE));
    PUT(b, ",\"turn\":");
    put_int(b, PyTuple_GET_ITEM(state, ST_TURN));
    PUT(b, ",\"direction\":");
    put_int(b, PyTuple_GET_ITEM(state, ST_DIRECTION));
    PUT(b, ",\"hand\":");
    put_cards(b, PyTuple_GET_ITEM(me, SE_HAND), table);
    PUT(b, ",\"face_up\":");
    put_stacks(b, PyTuple_GET_ITEM(me, SE_FACE_UP), table);
    PUT(b, ",\"face_down\":");
    put_face_down(b, PyTuple_GET_ITEM(me, SE_FACE_DOWN));
    PUT(b, ",\"players\":[");
    for (Py_ssize_t i = 0; i < players && !b->failed; i++) {
        PyObject *s = PyTuple_GET_ITEM(seats, i);
        PyObject *place = PyTuple_GET_ITEM(s, SE_PLACE), *forfeit = PyTuple_GET_ITEM(s, SE_FORFEIT);
        if (i) {
            PUT(b, ",");
        }
        PUT(b, "{\"seat\":");
        put_long(b, (long)i);
        PUT(b, ",\"hand_count\":");
        put_len(b, PyTuple_GET_ITEM(s, SE_HAND));
        PUT(b, ",\"face_up\":");
        if (i == seat || !setup) {
            put_stacks(b, PyTuple_GET_ITEM(s, SE_FACE_UP), table);
        } else {
            PUT(b, "null");
        }
        PUT(b, ",\"face_down\":");
        put_face_down(b, PyTuple_GET_ITEM(s, SE_FACE_DOWN));
        PUT(b, ",\"known_hand\":");
        put_cards(b, PyTuple_GET_ITEM(s, SE_KNOWN), table);
        PUT(b, ",\"place\":");
        if (place == Py_None) {
            PUT(b, "null");
        } else {
            put_int(b, place);
        }
        PUT(b, ",\"forfeit\":");
        if (forfeit == Py_None) {
            PUT(b, "null");
        } else {
            put_text(b, forfeit);
        }
        PUT(b, "}");
    }
    PUT(b, "],\"pile\":");
    put_cards(b, PyTuple_GET_ITEM(state, ST_PILE), table);
    PUT(b, ",\"pile_top\":");
    put_bytes(b, top);
    PUT(b, ",\"need\":");
    put_int(b, PyTuple_GET_ITEM(state, ST_NEED));
    PUT(b, ",\"descending\":");
    put_bool(b, PyTuple_GET_ITEM(state, ST_DESCENDING));
    PUT(b, ",\"stock\":");
    put_len(b, PyTuple_GET_ITEM(state, ST_STOCK));
    PUT(b, ",\"burned\":");
    put_cards(b, PyTuple_GET_ITEM(state, ST_BURNED), table);
    PUT(b, ",\"set_aside\":");
    put_len(b, PyTuple_GET_ITEM(state, ST_SET_ASIDE));
    PUT(b, "}");
}

static PyObject *
finish(Buf *b)
{
    PyObject *out = NULL;
    if (b->failed > 0) {
        out = Py_NewRef(Py_None);
    } else if (b->failed < 0) {
        PyErr_NoMemory();
    } else {
        out = PyBytes_FromStringAndSize(b->data, b->len);
    }
    if (b->data != b->first) {
        PyMem_Free(b->data);
    }
    return out;
}

static PyObject *
encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encode(state, seat, pile_top, cards) takes 4 arguments");
        return NULL;
    }
    PyObject *state = args[0], *top = args[2], *table = args[3];
    if (!record(state, ST_FIELDS) || !PyLong_CheckExact(args[1]) || !PyTuple_CheckExact(table)) {
        Py_RETURN_NONE;
    }
    long seat = PyLong_AsLong(args[1]);
    if (seat == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char first[2048];
    Buf b = {first, first, 0, sizeof(first), 0};
    put_view(&b, state, seat, top, table);
    return finish(&b);
}

/* One offered action, ``{"id": i, **views.action_json(action)}``, by its kind (its last field). */
static void put_action(Buf *b, Py_ssize_t id, PyObject *a, PyObject *table)
{
    if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) < 1) {
        b->failed = 1;
        return;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    PyObject *kind = PyTuple_GET_ITEM(a, n - 1);
    if (!PyUnicode_CheckExact(kind)) {
        b->failed = 1;
        return;
    }
    PUT(b, "{\"id\":");
    put_long(b, (long)id);
    PUT(b, ",\"kind\":");
    put_text(b, kind);
    if (n == 4 && PyUnicode_CompareWithASCIIString(kind, "play") == 0) {
        PyObject *target = PyTuple_GET_ITEM(a, 2);
        PUT(b, ",\"cards\":");
        put_cards(b, PyTuple_GET_ITEM(a, 0), table);
        PUT(b, ",\"from\":");
        put_text(b, PyTuple_GET_ITEM(a, 1));
        if (target != Py_None) {
            PUT(b, ",\"target\":");
            put_int(b, target);
        }
    } else if (n == 2 && PyUnicode_CompareWithASCIIString(kind, "pick_up") == 0) {
        PyObject *surrender = PyTuple_GET_ITEM(a, 0);
        if (surrender != Py_None) {
            long c = PyLong_CheckExact(surrender) ? PyLong_AsLong(surrender) : -1;
            if (c < 0 || c >= PyTuple_GET_SIZE(table)) {
                PyErr_Clear();
                b->failed = 1;
                return;
            }
            PUT(b, ",\"surrender\":");
            put_bytes(b, PyTuple_GET_ITEM(table, c));
        }
    } else if (n == 2 && PyUnicode_CompareWithASCIIString(kind, "flip") == 0) {
        PUT(b, ",\"position\":");
        put_int(b, PyTuple_GET_ITEM(a, 0));
    } else if (n == 2 && PyUnicode_CompareWithASCIIString(kind, "set_face_up") == 0) {
        PUT(b, ",\"face_up\":");
        put_stacks(b, PyTuple_GET_ITEM(a, 0), table);
    } else if (n == 2 && PyUnicode_CompareWithASCIIString(kind, "stack") == 0) {
        PUT(b, ",\"cards\":");
        put_cards(b, PyTuple_GET_ITEM(a, 0), table);
    } else if (!(n == 1 && PyUnicode_CompareWithASCIIString(kind, "done") == 0)) {
        b->failed = 1; /* an action this does not know: views.action_json writes it */
    }
    PUT(b, "}");
}

static void put_actions(Buf *b, PyObject *actions, PyObject *table)
{
    if (!PyTuple_CheckExact(actions)) {
        b->failed = 1;
        return;
    }
    PUT(b, "[");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(actions) && !b->failed; i++) {
        if (i) {
            PUT(b, ",");
        }
        put_action(b, i, PyTuple_GET_ITEM(actions, i), table);
    }
    PUT(b, "]");
}

static PyObject *
encode_actions(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_actions(actions, cards) takes 2 arguments");
        return NULL;
    }
    PyObject *actions = args[0], *table = args[1];
    if (!PyTuple_CheckExact(actions) || !PyTuple_CheckExact(table)) {
        Py_RETURN_NONE;
    }
    char first[1024];
    Buf b = {first, first, 0, sizeof(first), 0};
    put_actions(&b, actions, table);
    return finish(&b);
}

/* Each bytes object of a tuple, in order. */
static void put_parts(Buf *b, PyObject *parts)
{
    if (!PyTuple_CheckExact(parts)) {
        b->failed = 1;
        return;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++) {
        put_bytes(b, PyTuple_GET_ITEM(parts, i));
    }
}

/* encode_line(head, state, seat, pile_top, cards, middle, actions, tail): the bytes of head, the
 * view (as encode), middle, the actions (as encode_actions) and tail, in one buffer: a request's
 * whole line without its view and actions as objects of their own. */
static PyObject *
encode_line(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_line(head, state, seat, pile_top, cards, middle, actions, tail) takes 8 arguments");
        return NULL;
    }
    PyObject *state = args[1], *top = args[3], *table = args[4];
    if (!record(state, ST_FIELDS) || !PyLong_CheckExact(args[2]) || !PyTuple_CheckExact(table)) {
        Py_RETURN_NONE;
    }
    long seat = PyLong_AsLong(args[2]);
    if (seat == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char first[4096];
    Buf b = {first, first, 0, sizeof(first), 0};
    put_parts(&b, args[0]);
    put_view(&b, state, seat, top, table);
    put_parts(&b, args[5]);
    put_actions(&b, args[6], table);
    put_parts(&b, args[7]);
    return finish(&b);
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(state, seat, pile_top, cards): the seat's view as JSON bytes, or None if not handled here."},
    {"encode_actions", (PyCFunction)(void (*)(void))encode_actions, METH_FASTCALL,
     "encode_actions(actions, cards): the offered actions as JSON bytes, or None if not handled here."},
    {"encode_line", (PyCFunction)(void (*)(void))encode_line, METH_FASTCALL,
     "encode_line(head, state, seat, pile_top, cards, middle, actions, tail): head, the view, middle, the "
     "actions and tail as one bytes object, or None if not handled here."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "arena.engine._view", NULL, 0, methods,
};

PyMODINIT_FUNC
PyInit__view(void)
{
    return PyModuleDef_Init(&module);
}
