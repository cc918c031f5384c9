#!/usr/bin/env bash
# Palace Arena starter bot (bash; only bash builtins + grep, no jq).
#
# The referee sends one JSON object per line on stdin.  This bot answers
#   hello    -> a hello line (plain echo)
#   request  -> the bare id of a random legal action, e.g. "2"
# and ignores everything else; it exits on "shutdown" or EOF.
# stdout carries ONLY protocol lines; log with `log` (stderr).
#
# JSON is not parsed properly: grep splits each message into tokens and a
# small loop walks the *top level* of the object, so a nested "type" in
# "view"/"events"/"actions" does not confuse it.  It records top-level scalar
# fields in TOP[...] and counts the elements of the "actions" array; action
# ids are always 0..count-1.
#
# Put your strategy in choose() (look for "YOUR STRATEGY GOES HERE").
# Randomness: each game reseeds $RANDOM from its "start" message's "seed", as
# protocol/PROTOCOL.md recommends, so `arena debug` replays an unmodified bot
# exactly.
# Env: BOT_SEED (optional) seeds $RANDOM before any start message (a run by
# hand); otherwise the clock does.

BOT_NAME="starter-bash"   # keep in sync with bot.toml
BOT_VERSION="1.0.0"

log() { printf '[%s] %s\n' "$BOT_NAME" "$*" >&2; }

if [[ -n ${BOT_SEED-} ]]; then
    if [[ $BOT_SEED =~ ^[0-9]{1,9}$ ]]; then
        SEED=$((10#$BOT_SEED))
    else   # any other string: use its checksum
        read -r SEED _ < <(printf '%s' "$BOT_SEED" | cksum)
    fi
else
    now=${EPOCHREALTIME:-$(date +%s)$$}   # EPOCHREALTIME needs bash 5
    SEED=$(( 10#${now//[.,]/} % 1000000007 ))
fi
RANDOM=$SEED

# JSON tokens: strings (with escapes), punctuation, and bare scalars.
TOKEN_RE='"([^"\\]|\\.)*"|[][{}:,]|[^][{}:,"[:space:]]+'

declare -A TOP     # top-level scalar fields of the current message, raw JSON
N_ACTIONS=0        # number of elements in the top-level "actions" array

# scan LINE: fill TOP and N_ACTIONS.
scan() {
    local -a toks
    mapfile -t toks < <(LC_ALL=C grep -oE "$TOKEN_RE" <<<"$1")
    TOP=()
    N_ACTIONS=0
    local depth=0 key="" expect_key=0 in_actions=0 tok
    for tok in "${toks[@]}"; do
        # an element of the top-level "actions" array starts here?
        if ((in_actions && depth == 2)) && [[ $tok != "," && $tok != "]" ]]; then
            ((N_ACTIONS++))
        fi
        case $tok in
            "{" | "[")
                if ((depth == 0)); then
                    expect_key=1
                elif ((depth == 1)) && [[ $key == actions && $tok == "[" ]]; then
                    in_actions=1
                fi
                ((depth++))
                ;;
            "}" | "]")
                ((depth--))
                ((depth == 1)) && in_actions=0
                ;;
            ",")
                ((depth == 1)) && expect_key=1
                ;;
            ":") ;;
            *)
                if ((depth == 1)); then
                    if ((expect_key)); then
                        key=${tok#\"}
                        key=${key%\"}
                        expect_key=0
                    elif [[ -n $key ]]; then
                        TOP[$key]=$tok
                    fi
                fi
                ;;
        esac
    done
}

# Strip the quotes of a JSON string token ("g-1" -> g-1).
unquote() { local s=${1#\"}; printf '%s' "${s%\"}"; }

# ==========================================================================
# YOUR STRATEGY GOES HERE
# ==========================================================================
# Print the id of the action to play, in 0..N_ACTIONS-1.  The whole request
# line is in $1; TOP[id], TOP[decision], ... hold the top-level scalars.
choose() {
    echo $((RANDOM % N_ACTIONS))
}
# ==========================================================================

while IFS= read -r line || [[ -n $line ]]; do
    scan "$line"
    case ${TOP[type]-} in
        '"hello"')
            echo "{\"type\":\"hello\",\"protocol\":1,\"name\":\"$BOT_NAME\",\"version\":\"$BOT_VERSION\"}"
            ;;
        '"start"')
            # A new game begins (one process plays many games): seed from its start.seed.
            game_seed=$SEED
            if [[ ${TOP[seed]-} =~ ^[0-9]{1,18}$ ]]; then
                game_seed=$((10#${TOP[seed]}))
            fi
            RANDOM=$game_seed
            log "game $(unquote "${TOP[game]-?}") starts: seat ${TOP[seat]-?} of ${TOP[players]-?} players (seed $game_seed)"
            ;;
        '"request"')
            if ((N_ACTIONS > 0)); then
                # Call choose directly (not in $(...)) so $RANDOM advances.
                choose "$line"
            else
                log "request ${TOP[id]-?} without actions; answering 0"
                echo 0
            fi
            ;;
        '"shutdown"')
            exit 0
            ;;
        *) ;;  # error, end, unknown types: no answer
    esac
done
exit 0
