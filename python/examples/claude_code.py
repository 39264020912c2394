#!/usr/bin/python3
"""The same loop with a real harness: Claude Code inside a brig sandbox (what
`brig agent claude` does), driven from Python. Not run by the tests.

    export ANTHROPIC_API_KEY=...        # or CLAUDE_CODE_OAUTH_TOKEN
    ./build/brig image build --profile agents
    python3 python/examples/claude_code.py "write a fizzbuzz in python and run it"

The credential is read from this process's environment by libbrig and sent
with each command (harness="claude"): it never appears in an argument list,
in the container's configuration or in this script's output. The session is
named, so the computer and its files stay for the next run; sb.destroy()
removes them.
"""

import os
import sys

sys.path.insert(0, __file__.rsplit("/examples/", 1)[0])  # the package from this checkout

import brig  # noqa: E402

IMAGE = os.environ.get("BRIG_AGENTS_IMAGE", "brig-agents:local")


def main() -> int:
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")):
        print("set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN", file=sys.stderr)
        return 2
    task = " ".join(sys.argv[1:]) or "Create hello.py that prints a greeting, run it, and say what it printed."
    sb = brig.Sandbox(IMAGE, ns="examples", agent="claude", session="demo", harness="claude",
                      network="isolated",  # the model's API is on the internet; the host and other sandboxes are not
                      cpus=2.0, memory_mb=4096, workspace_mb=1024, runtime_mb=512)
    try:
        sb.exec(["mkdir", "-p", "/runtime/.claude", "/runtime/tmp"])
        env = {"CLAUDE_CONFIG_DIR": "/runtime/.claude", "TMPDIR": "/runtime/tmp"}
        stream = sb.exec_stream(["claude", "-p", task, "--dangerously-skip-permissions"], env=env, timeout=900)
        for ev in stream:  # Ctrl-C ends claude in the sandbox; the computer keeps its files
            (sys.stdout if ev.stream == "stdout" else sys.stderr).write(ev.text)
        print(f"\nclaude exited {stream.result.exit_code if stream.result else '?'}; files now in /workspace:")
        for f in sb.files.list("/workspace"):
            print(f"  {f.type:4} {f.size:8} {f.name}")
        sb.checkpoint(keep=3)
    finally:
        sb.close()  # named session: the computer keeps running for the next call
    return 0


if __name__ == "__main__":
    sys.exit(main())
