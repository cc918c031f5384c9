// Palace Arena starter bot (plain JDK 17+, no Maven, no libraries).
//
// The referee sends one JSON object per line on stdin and reads one reply
// line from stdout. stdout carries ONLY protocol lines; log to stderr.
// This template plays a uniformly random legal action.
//
// There is no JSON library: a tiny scanner walks the *top level* of each
// message (so a nested "type" or "id" inside "view"/"events"/"actions" never
// confuses it), picks out "type", "id", "game" and counts the elements of the
// "actions" array. Action ids are always 0..count-1, which is all a random
// bot needs. For a real strategy you will want to parse "view" and "actions"
// properly (extend the scanner, or vendor a single-file JSON parser).
//
// Put your strategy in choose() (look for "YOUR STRATEGY GOES HERE").
//
// Randomness: each game reseeds the generator from its "start" message's
// "seed", as protocol/PROTOCOL.md recommends, so `arena debug` replays an
// unmodified bot exactly.
//
// Build: javac -encoding UTF-8 Bot.java      Run: java -cp . Bot
// Env:   BOT_SEED (optional) seeds the random generator before any start
//        message (a run by hand); else the clock.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Random;

public final class Bot {
    static final String NAME = "starter-java"; // keep in sync with bot.toml
    static final String VERSION = "1.0.0";

    /** Protocol output; System.out is redirected to stderr (see main). */
    static PrintStream proto;
    static long seed;
    static Random rng;

    // ======================================================================
    // YOUR STRATEGY GOES HERE
    // ======================================================================
    /**
     * Return the id of the action to play, in 0..nActions-1.
     * {@code line} is the whole request (JSON text), for digging into
     * "view" / "actions" with {@link #topValue}.
     */
    static int choose(String line, int nActions) {
        return rng.nextInt(nActions);
    }
    // ======================================================================

    static void log(String s) {
        System.err.println("[" + NAME + "] " + s);
        System.err.flush();
    }

    static void send(String line) {
        proto.print(line);
        proto.print('\n');
        proto.flush();
    }

    public static void main(String[] args) throws IOException {
        proto = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        // A stray System.out.println in strategy code goes to the log instead
        // of corrupting the protocol stream.
        System.setOut(System.err);

        String env = System.getenv("BOT_SEED");
        if (env != null && !env.isEmpty()) {
            try {
                seed = Long.parseLong(env.trim());
            } catch (NumberFormatException e) {
                seed = env.hashCode();
            }
        } else {
            seed = System.nanoTime() ^ System.currentTimeMillis();
        }
        rng = new Random(seed);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String type = topValue(line, "type");
            if ("\"hello\"".equals(type)) {
                send("{\"type\":\"hello\",\"protocol\":1,\"name\":\"" + NAME + "\",\"version\":\"" + VERSION + "\"}");
            } else if ("\"start\"".equals(type)) {
                // A new game begins (one process plays many games): seed from its start.seed.
                long gameSeed = seed;
                String given = topValue(line, "seed");
                if (given != null) {
                    try {
                        gameSeed = Long.parseLong(given);
                    } catch (NumberFormatException e) {
                        log("start.seed " + given + " is not an integer; keeping seed " + seed);
                    }
                }
                rng.setSeed(gameSeed);
                log("game " + topValue(line, "game") + " starts: seat " + topValue(line, "seat")
                        + " of " + topValue(line, "players") + " players (seed " + gameSeed + ")");
            } else if ("\"request\"".equals(type)) {
                String id = topValue(line, "id");
                int n = arrayLength(topValue(line, "actions"));
                int action = 0;
                if (n > 0) {
                    action = choose(line, n);
                } else {
                    log("request " + id + " without actions; answering 0");
                }
                if (id != null) { // echo the request id exactly as the referee wrote it
                    send("{\"type\":\"action\",\"request\":" + id + ",\"action\":" + action + "}");
                } else { // a bare action id is also a valid answer
                    send(Integer.toString(action));
                }
            } else if ("\"shutdown\"".equals(type)) {
                System.exit(0);
            }
            // "error", "end" and unknown types need no answer.
        }
        System.exit(0); // EOF
    }

    // ------------------------------------------------------------ scanner

    static int skipWs(String s, int i) {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
            i++;
        }
        return i;
    }

    /** s.charAt(i) == '"'; returns the index just past the closing quote. */
    static int skipString(String s, int i) {
        for (i++; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\') i++;
            else if (c == '"') return i + 1;
        }
        return s.length();
    }

    /** Returns the index just past the JSON value starting at i. */
    static int skipValue(String s, int i) {
        if (i >= s.length()) return i;
        char c = s.charAt(i);
        if (c == '"') return skipString(s, i);
        if (c == '{' || c == '[') {
            int depth = 0;
            while (i < s.length()) {
                c = s.charAt(i);
                if (c == '"') {
                    i = skipString(s, i);
                    continue;
                }
                if (c == '{' || c == '[') depth++;
                else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
                i++;
            }
            return i;
        }
        while (i < s.length() && ",}] \t\r\n".indexOf(s.charAt(i)) < 0) i++; // number/true/false/null
        return i;
    }

    /** Raw JSON text of top-level key {@code key} in object {@code json}, or null. */
    static String topValue(String json, String key) {
        int i = skipWs(json, 0);
        if (i >= json.length() || json.charAt(i) != '{') return null;
        i++;
        while (true) {
            i = skipWs(json, i);
            if (i >= json.length() || json.charAt(i) != '"') return null;
            int k = i;
            i = skipString(json, i);
            boolean match = json.regionMatches(k + 1, key, 0, key.length()) && i == k + key.length() + 2;
            i = skipWs(json, i);
            if (i >= json.length() || json.charAt(i) != ':') return null;
            i = skipWs(json, i + 1);
            int v = i;
            i = skipValue(json, i);
            if (match) return json.substring(v, i);
            i = skipWs(json, i);
            if (i >= json.length() || json.charAt(i) != ',') return null;
            i++;
        }
    }

    /** Number of elements of the JSON array text {@code arr} (0 if not an array). */
    static int arrayLength(String arr) {
        if (arr == null || arr.isEmpty() || arr.charAt(0) != '[') return 0;
        int i = skipWs(arr, 1);
        if (i < arr.length() && arr.charAt(i) == ']') return 0;
        int n = 0;
        while (i < arr.length()) {
            i = skipValue(arr, i);
            n++;
            i = skipWs(arr, i);
            if (i >= arr.length() || arr.charAt(i) != ',') break;
            i = skipWs(arr, i + 1);
        }
        return n;
    }
}
