#!/usr/bin/python3
"""A minimal agent-style loop without a model: a list of steps (shell
commands and file edits), each run in one sandbox, each result fed back into
a transcript, as an agent framework's tool loop would.

    BRIG_LIBRARY=build/libbrig.so python3 python/examples/agent_loop.py [IMAGE]

The sandbox is anonymous, so it is destroyed when the `with` block ends.
"""

import sys
from typing import List, Tuple, Union

sys.path.insert(0, __file__.rsplit("/examples/", 1)[0])  # the package from this checkout

import brig  # noqa: E402

Step = Union[Tuple[str, str], Tuple[str, str, str]]
STEPS: List[Step] = [
    ("write", "hello.py", "print('hello from the sandbox')\n"),
    ("run", "python3 hello.py || sh -c 'echo no python3 in this image; cat hello.py'"),
    ("write", "data/numbers.txt", "".join(f"{i}\n" for i in range(1, 11))),
    ("run", "awk '{s+=$1} END {print s}' data/numbers.txt"),
    ("edit", "hello.py", "print('edited by the loop')\n"),
    ("run", "cat hello.py; ls -la /workspace"),
    ("run", "sleep 10"),  # runs into the step timeout: the sandbox keeps going
    ("run", "echo still here; id -u"),
]


def main() -> int:
    image = sys.argv[1] if len(sys.argv) > 1 else brig.DEFAULT_IMAGE
    transcript = []
    with brig.Sandbox(image, cpus=1.0, memory_mb=1024, workspace_mb=256, runtime_mb=128,
                      network="none") as sb:
        print(f"sandbox {sb.name}")
        for step in STEPS:
            kind, target = step[0], step[1]
            if kind in ("write", "edit"):
                sb.files.write(target, step[2])  # type: ignore[misc]
                observation = f"wrote {len(step[2])} bytes to {target}"  # type: ignore[misc]
            else:
                r = sb.exec(target, timeout=3)
                observation = f"exit {r.exit_code}{' (timed out)' if r.timed_out else ''}\n{r.text}{r.stderr_text}"
            transcript.append((step, observation))
            print(f"$ {kind} {target}\n{observation.rstrip()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
