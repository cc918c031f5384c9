#!/usr/bin/env node
// Palace Arena starter bot (Node 20+, no npm packages).
//
// The referee talks to this program over stdin/stdout, one JSON object per
// line (UTF-8). stdout carries ONLY protocol lines; log to stderr.
// This template plays a uniformly random legal action.
//
// To write your own bot, replace the body of `choose(request)` below (look for
// "YOUR STRATEGY GOES HERE"). The rest is protocol plumbing.
//
// Randomness: each game reseeds the generator from its `start` message's `seed`,
// as protocol/PROTOCOL.md recommends, so `arena debug` replays an unmodified bot
// exactly. Environment: BOT_SEED (optional) seeds it before any start message (a
// run by hand); without it that seed comes from the clock.
'use strict';

const readline = require('node:readline');

const BOT_NAME = 'starter-javascript'; // keep in sync with bot.toml
const BOT_VERSION = '1.0.0';
const PROTOCOL = 1;

// Protocol output goes through `send` only. console.log is redirected to
// stderr so a stray debug print cannot corrupt the protocol stream.
console.log = console.error;

function log(...parts) {
  process.stderr.write(`[${BOT_NAME}] ${parts.join(' ')}\n`);
}

function send(obj) {
  // Node writes to pipes synchronously on Linux, so the line is flushed by
  // the time write() returns; the process never exits with a reply pending.
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// Math.random cannot be seeded, so use a tiny seeded PRNG (mulberry32).
let rngState = 0;
function reseed(seed) {
  rngState = seed >>> 0;
}
function random() {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

function seedFromEnv() {
  const s = process.env.BOT_SEED;
  if (s === undefined || s === '') {
    return (Date.now() ^ Number(process.hrtime.bigint() & 0xffffffffn)) >>> 0;
  }
  if (/^-?\d+$/.test(s)) return Number(BigInt.asUintN(32, BigInt(s)));
  let h = 0x811c9dc5; // FNV-1a of the string
  for (const ch of Buffer.from(s, 'utf8')) h = Math.imul(h ^ ch, 0x01000193) >>> 0;
  return h;
}

const SEED = seedFromEnv();
reseed(SEED);

// ==========================================================================
// YOUR STRATEGY GOES HERE
// ==========================================================================
/**
 * Return the id (a number) of the action to play.
 *
 * `request` looks like
 *   {type: 'request', id: 17, game: 'g-1', decision: 'play',
 *    view: {...}, events: [...],
 *    actions: [{id: 0, kind: 'play', cards: ['7H'], from: 'hand'},
 *              {id: 1, kind: 'pick_up'}],
 *    clock: {move_ms: 1000, bank_ms: 10000}}
 * Action ids are always 0..actions.length-1, in order; all are legal.
 */
function choose(request) {
  const actions = Array.isArray(request.actions) ? request.actions : [];
  if (actions.length === 0) {
    log(`request ${request.id} has no actions; answering 0`);
    return 0;
  }
  return Math.floor(random() * actions.length);
}

function onGameStart(msg) {
  // A new game begins (one process plays many games): seed from the game's start.seed.
  const seed = Number.isSafeInteger(msg.seed) ? msg.seed : SEED;
  reseed(seed);
  log(`game ${msg.game} starts: seat ${msg.seat} of ${msg.players} players (seed ${seed})`);
}

function onGameEnd(_msg) {}

// ==========================================================================
// Protocol loop.
// ==========================================================================
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });

rl.on('line', (line) => {
  line = line.trim();
  if (line === '') return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (err) {
    log(`ignoring unparsable line: ${err.message}`);
    return;
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return;

  switch (msg.type) {
    case 'hello':
      send({ type: 'hello', protocol: PROTOCOL, name: BOT_NAME, version: BOT_VERSION });
      break;
    case 'start':
      onGameStart(msg);
      break;
    case 'request':
      send({ type: 'action', request: msg.id, action: choose(msg) });
      break;
    case 'error':
      log(`referee error: ${msg.reason} ${msg.message}`);
      break;
    case 'end':
      onGameEnd(msg);
      break;
    case 'shutdown':
      rl.close();
      process.exit(0);
      break;
    default:
      break; // unknown type: ignore (forward compatibility)
  }
});

rl.on('close', () => process.exit(0)); // EOF on stdin
