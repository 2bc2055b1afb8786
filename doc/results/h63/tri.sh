#!/bin/bash
# tri.sh KIND PEERDRIVER ROUNDS OUT: base wort, new wort and the peer's driver on one keys file, rotated per round
# (h63's base binary /tmp/h63-base-wort; NEWBIN the new one). The script itself is now
# doc/results/h67/tri.sh, which h67 generalized (BASEBIN, KEYS); this runs it as h63 did.
BASEBIN=${BASEBIN:-/tmp/h63-base-wort} exec bash "$(dirname "$0")/../h67/tri.sh" "$@"
