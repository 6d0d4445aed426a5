"""One side of one `bench/peers.py` measurement, in its own process: the floor or TRL.

    python -m bench.peer_side --side floor|trl --kind dpo|sft|grpo --model DIR --data FILE
        --work JSON --out RESULT.json
Writes {"loop_s": seconds of the training loop}; the parent measures the whole process.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--side", choices=["floor", "trl"], required=True)
    p.add_argument("--kind", choices=["dpo", "sft", "grpo"], required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import torch

    from bench import peer_floor, peer_trl
    from bench.peer_setup import Work

    torch.set_num_threads(1)
    side = peer_floor if args.side == "floor" else peer_trl
    loop = getattr(side, args.kind)(Path(args.model), Path(args.data), Work.from_json(args.work))
    Path(args.out).write_text(json.dumps({"loop_s": loop}))


if __name__ == "__main__":
    main()
