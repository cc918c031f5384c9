/*
 * Palace Arena starter bot (C11, no third-party libraries).
 *
 * The referee sends one JSON object per line on stdin and reads one reply
 * line from stdout.  stdout carries ONLY protocol lines; log to stderr.
 * This template plays a uniformly random legal action.
 *
 * There is no JSON library here: a tiny scanner walks the *top level* of each
 * message (so a nested "type" or "id" inside "view"/"events"/"actions" never
 * confuses it), picks out "type", "id", "game" and counts the elements of the
 * "actions" array.  Action ids are always 0..count-1, so that is all a random
 * bot needs.  A real strategy will want a proper JSON parser (e.g. vendor a
 * single-file one such as cJSON) to read "view" and "actions".
 *
 * Put your strategy in choose() (look for "YOUR STRATEGY GOES HERE").
 *
 * Randomness: each game reseeds the generator from its "start" message's "seed",
 * as protocol/PROTOCOL.md recommends, so `arena debug` replays an unmodified bot
 * exactly.
 *
 * Build:  gcc -std=c11 -O2 -Wall -Wextra -o target/bot bot.c
 * Env:    BOT_SEED (optional) seeds the random generator before any start
 *         message (a run by hand); else the clock.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BOT_NAME "starter-c" /* keep in sync with bot.toml */
#define BOT_VERSION "1.0.0"

/* ---------------------------------------------------------------- random */

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t seed_from_env(void)
{
    const char *s = getenv("BOT_SEED");
    if (s && *s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end == '\0')
            return (uint64_t)v;
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the string */
        for (; *s; s++)
            h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
    }
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&ts;
}

/* ---------------------------------------------------------- tiny scanner */

typedef struct {
    const char *p; /* start of the raw JSON value (NULL if key absent) */
    size_t len;    /* length of the raw value text */
} Span;

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

/* p points at '"'; return pointer just past the closing quote. */
static const char *skip_string(const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return p;
}

/* Return pointer just past the JSON value starting at p. */
static const char *skip_value(const char *p)
{
    if (*p == '"')
        return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') {
                p = skip_string(p);
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0)
                    return p + 1;
            }
            p++;
        }
        return p;
    }
    /* number, true, false, null */
    while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' &&
           *p != '\r' && *p != '\n')
        p++;
    return p;
}

/* Find the raw value of top-level key `key` in the object `json`. */
static Span top_value(const char *json, const char *key)
{
    Span none = {NULL, 0};
    size_t klen = strlen(key);
    const char *p = skip_ws(json);
    if (*p != '{')
        return none;
    p++;
    for (;;) {
        p = skip_ws(p);
        if (*p != '"')
            return none; /* '}' (end of object) or malformed */
        const char *kstart = p + 1;
        p = skip_string(p);
        int match = (size_t)(p - 1 - kstart) == klen && memcmp(kstart, key, klen) == 0;
        p = skip_ws(p);
        if (*p != ':')
            return none;
        p = skip_ws(p + 1);
        const char *v = p;
        p = skip_value(p);
        if (match) {
            Span s = {v, (size_t)(p - v)};
            return s;
        }
        p = skip_ws(p);
        if (*p != ',')
            return none;
        p++;
    }
}

/* Is the span the JSON string "s"? (Plain comparison, no escape decoding.) */
static int span_is_string(Span v, const char *s)
{
    size_t n = strlen(s);
    return v.p && v.len == n + 2 && v.p[0] == '"' && memcmp(v.p + 1, s, n) == 0;
}

/* Number of elements in the JSON array held by the span (0 if not an array). */
static int array_length(Span v)
{
    if (!v.p || *v.p != '[')
        return 0;
    const char *p = skip_ws(v.p + 1);
    if (*p == ']')
        return 0;
    int n = 0;
    while (*p) {
        p = skip_value(p);
        n++;
        p = skip_ws(p);
        if (*p != ',')
            break;
        p = skip_ws(p + 1);
    }
    return n;
}

/* --------------------------------------------------------------- output */

static void send_line(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* ============================================================================
 * YOUR STRATEGY GOES HERE
 * ========================================================================= */

/* Return the id of the action to play, in 0..n_actions-1.  `line` is the whole
 * request message (JSON text) if you want to dig into "view" or "actions". */
static int choose(const char *line, int n_actions)
{
    (void)line;
    return (int)(rng_next() % (uint64_t)n_actions);
}

/* ======================================================================== */

/* Read one line of any length (messages can be up to 1 MiB). Returns NULL on
 * EOF with nothing read. The buffer is reused between calls. */
static char *read_line(void)
{
    static char *buf = NULL;
    static size_t cap = 0;
    size_t len = 0;
    int c;
    while ((c = getchar()) != EOF) {
        if (len + 1 >= cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                fprintf(stderr, "[" BOT_NAME "] out of memory\n");
                exit(1);
            }
            buf = nb;
        }
        if (c == '\n')
            break;
        buf[len++] = (char)c;
    }
    if (c == EOF && len == 0)
        return NULL;
    buf[len] = '\0';
    return buf;
}

int main(void)
{
    uint64_t seed = seed_from_env();
    rng_state = seed;

    char *line;
    while ((line = read_line()) != NULL) {
        Span type = top_value(line, "type");

        if (span_is_string(type, "hello")) {
            send_line("{\"type\":\"hello\",\"protocol\":1,\"name\":\"" BOT_NAME
                      "\",\"version\":\"" BOT_VERSION "\"}");
        } else if (span_is_string(type, "start")) {
            /* A new game begins (one process plays many games): seed from its start.seed. */
            Span game = top_value(line, "game");
            Span seat = top_value(line, "seat");
            Span given = top_value(line, "seed");
            uint64_t game_seed = seed;
            if (given.p && given.len > 0 && given.p[0] >= '0' && given.p[0] <= '9')
                game_seed = strtoull(given.p, NULL, 10);
            rng_state = game_seed;
            fprintf(stderr, "[" BOT_NAME "] game %.*s starts: seat %.*s (seed %llu)\n",
                    (int)game.len, game.p ? game.p : "", (int)seat.len, seat.p ? seat.p : "",
                    (unsigned long long)game_seed);
        } else if (span_is_string(type, "request")) {
            Span id = top_value(line, "id");
            int n = array_length(top_value(line, "actions"));
            int action = 0;
            if (n > 0)
                action = choose(line, n);
            else
                fprintf(stderr, "[" BOT_NAME "] request without actions; answering 0\n");
            if (id.p) /* echo the request id exactly as the referee wrote it */
                printf("{\"type\":\"action\",\"request\":%.*s,\"action\":%d}\n", (int)id.len, id.p,
                       action);
            else /* no id? the bare action id is also a valid answer */
                printf("%d\n", action);
            fflush(stdout);
        } else if (span_is_string(type, "shutdown")) {
            return 0;
        }
        /* "error", "end" and unknown types need no answer. */
    }
    return 0; /* EOF */
}
