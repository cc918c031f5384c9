//! Palace Arena starter bot (Rust, std only: no crates).
//!
//! The referee sends one JSON object per line on stdin and reads one reply
//! line from stdout. stdout carries ONLY protocol lines; log to stderr
//! (`eprintln!`). This template plays a uniformly random legal action.
//!
//! There is no JSON library: a tiny scanner walks the *top level* of each
//! message (so a nested "type" or "id" inside "view"/"events"/"actions" never
//! confuses it), picks out "type", "id", "game" and counts the elements of
//! the "actions" array. Action ids are always 0..count-1, which is all a
//! random bot needs. For a real strategy, extend the scanner (or add serde_json
//! if your arena allows crates) to read "view" and "actions".
//!
//! Put your strategy in `choose` (look for "YOUR STRATEGY GOES HERE").
//!
//! Randomness: each game reseeds the generator from its "start" message's
//! "seed", as protocol/PROTOCOL.md recommends, so `arena debug` replays an
//! unmodified bot exactly.
//!
//! Build: cargo build --release --offline
//! Env: BOT_SEED (optional) seeds the generator before any start message (a run
//! by hand); else the clock.

use std::io::{self, BufRead, Write};
use std::time::{SystemTime, UNIX_EPOCH};

const NAME: &str = "starter-rust"; // keep in sync with bot.toml
const VERSION: &str = "1.0.0";

/// splitmix64: tiny seeded PRNG (std has no random numbers).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

fn seed_from_env() -> u64 {
    match std::env::var("BOT_SEED") {
        Ok(s) if !s.is_empty() => s.trim().parse::<u64>().unwrap_or_else(|_| {
            // Any other string: FNV-1a hash of it.
            s.bytes()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
        }),
        _ => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ (std::process::id() as u64) << 32,
    }
}

// ==========================================================================
// YOUR STRATEGY GOES HERE
// ==========================================================================
/// Return the id of the action to play, in 0..n_actions. `line` is the whole
/// request (raw JSON bytes) for digging into "view"/"actions" with `top_value`.
fn choose(rng: &mut Rng, _line: &[u8], n_actions: usize) -> usize {
    rng.below(n_actions)
}
// ==========================================================================

fn main() {
    let seed = seed_from_env();
    let mut rng = Rng(seed);
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut line: Vec<u8> = Vec::with_capacity(1 << 16);

    loop {
        line.clear();
        // Read raw bytes so that even invalid UTF-8 cannot stop the bot.
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break, // EOF
            Ok(_) => {}
            Err(e) => {
                eprintln!("[{NAME}] read error: {e}");
                break;
            }
        }
        let msg = line.as_slice();
        let reply = match top_value(msg, b"type") {
            Some(b"\"hello\"") => Some(format!(
                "{{\"type\":\"hello\",\"protocol\":1,\"name\":\"{NAME}\",\"version\":\"{VERSION}\"}}"
            )),
            Some(b"\"start\"") => {
                // A new game begins (one process plays many games): seed from its start.seed.
                let field = |k: &[u8]| {
                    top_value(msg, k).map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
                };
                let game_seed = field(b"seed").parse::<u64>().unwrap_or(seed);
                rng = Rng(game_seed);
                eprintln!(
                    "[{NAME}] game {} starts: seat {} of {} players (seed {game_seed})",
                    field(b"game"),
                    field(b"seat"),
                    field(b"players")
                );
                None
            }
            Some(b"\"request\"") => {
                let n = top_value(msg, b"actions").map(array_len).unwrap_or(0);
                let action = if n > 0 {
                    choose(&mut rng, msg, n)
                } else {
                    eprintln!("[{NAME}] request without actions; answering 0");
                    0
                };
                Some(match top_value(msg, b"id") {
                    // Echo the request id exactly as the referee wrote it.
                    Some(id) => format!(
                        "{{\"type\":\"action\",\"request\":{},\"action\":{action}}}",
                        String::from_utf8_lossy(id)
                    ),
                    // No id? A bare action id is also a valid answer.
                    None => action.to_string(),
                })
            }
            Some(b"\"shutdown\"") => break,
            _ => None, // "error", "end" and unknown types need no answer
        };
        if let Some(r) = reply {
            if writeln!(out, "{r}").and_then(|_| out.flush()).is_err() {
                break; // referee went away
            }
        }
    }
}

// ------------------------------------------------------------------ scanner

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// `s[i] == b'"'`; returns the index just past the closing quote.
fn skip_string(s: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    s.len()
}

/// Returns the index just past the JSON value starting at `i`.
fn skip_value(s: &[u8], mut i: usize) -> usize {
    match s.get(i) {
        None => i,
        Some(b'"') => skip_string(s, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            while i < s.len() {
                match s[i] {
                    b'"' => {
                        i = skip_string(s, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            s.len()
        }
        Some(_) => {
            // number, true, false, null
            while i < s.len() && !matches!(s[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            i
        }
    }
}

/// Raw JSON text of top-level key `key` in the object `json`, if present.
fn top_value<'a>(json: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut i = skip_ws(json, 0);
    if json.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(json, i);
        if json.get(i) != Some(&b'"') {
            return None;
        }
        let k = i;
        i = skip_string(json, i).min(json.len());
        let matched = i >= k + 2 && &json[k + 1..i - 1] == key;
        i = skip_ws(json, i);
        if json.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(json, i + 1);
        let v = i;
        i = skip_value(json, i).min(json.len());
        if matched {
            return Some(&json[v..i]);
        }
        i = skip_ws(json, i);
        if json.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// Number of elements of the JSON array text `arr` (0 if it is not an array).
fn array_len(arr: &[u8]) -> usize {
    if arr.first() != Some(&b'[') {
        return 0;
    }
    let mut i = skip_ws(arr, 1);
    if arr.get(i) == Some(&b']') {
        return 0;
    }
    let mut n = 0;
    while i < arr.len() {
        i = skip_value(arr, i);
        n += 1;
        i = skip_ws(arr, i);
        if arr.get(i) != Some(&b',') {
            break;
        }
        i = skip_ws(arr, i + 1);
    }
    n
}
