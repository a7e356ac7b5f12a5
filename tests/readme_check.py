#!/usr/bin/env python3
"""The README cannot drift from the binaries: every command it shows is checked.

- Every `tessel ...` command in the README (code blocks, the command table, inline code) names a
  subcommand that exists, and every flag it passes is one `tessel SUBCOMMAND --help` lists.
- Every flag `tessel SUBCOMMAND --help` lists appears in the README's command table row of that
  subcommand (the table is the reference of the flags).
- Every `tessel_bench_*` command passes only flags its program's usage header lists, spelled as it
  parses them (`--db=FILE`, not `--db FILE`).
- Every `make TARGET` is a target of the Makefile.
- The README's links to files stay inside the repository and name files that exist.
- The `tessel lower` and `tessel --version` commands of the README are run for real (cheap).

Usage: tests/readme_check.py --tessel build/cli/tessel [--root .]. Exit 0 when all hold; 1 with
one line per problem on stderr. Run by CTest as readme_check.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys

TWO_WORD = {"costmodel": ["eval"], "token": ["create"]}
# The flags of every command that talks to a server, documented once (the `tessel jobs` row).
CONNECTION_FLAGS = {"--server", "--tls-ca", "--tls-cert", "--tls-key", "--token", "--timeout"}


def commands(readme):
    """(line number, text) of every tessel or tessel_bench_* or make command the README shows."""
    out = []
    lines = readme.splitlines()
    in_code = False
    pending, start = "", 0
    for n, raw in enumerate(lines, 1):
        if raw.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
            if pending:
                pending += " " + line.strip()
            else:
                m = re.match(r"^\s*(?:\$ )?(?:sudo )?((?:[A-Z_]+=\S+ )*)"
                             r"(tessel(?:_bench_\w+)?\s.*|make \w+.*)$", line)
                if not m or re.match(r"tessel [\w-]+:", m.group(2)):  # output, not a command
                    continue
                pending, start = m.group(2), n
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            out.append((start, pending, True))
            pending = ""
        else:
            for span in re.findall(r"`([^`]+)`", raw):
                if re.match(r"(tessel(_bench_\w+)? [^:]*$|tessel --|make \w)", span) and \
                        not re.match(r"tessel \w+:", span):
                    out.append((n, span, False))
    return out


def words_of(text):
    text = text.replace("\\|", "|")
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


class Check:
    def __init__(self, root, tessel):
        self.root, self.tessel = root, tessel
        self.problems = []
        self.helps = {}

    def fail(self, n, what):
        self.problems.append(f"README.md:{n}: {what}")

    def help(self, sub):
        key = tuple(sub)
        if key not in self.helps:
            r = subprocess.run([self.tessel] + sub + ["--help"], capture_output=True, text=True,
                               timeout=60)
            self.helps[key] = (r.returncode, r.stdout + r.stderr)
        return self.helps[key]

    def subcommands(self):
        _, out = self.help([])
        listed = out.split("Subcommands:", 1)[-1]
        return set(re.findall(r"^  ([a-z][a-z0-9-]*)\s", listed, re.M))

    def subcommand(self, words):
        sub = [words[1]] if len(words) > 1 and not words[1].startswith("-") else []
        if sub and sub[0] in TWO_WORD and len(words) > 2 and words[2] in TWO_WORD[sub[0]]:
            sub.append(words[2])
        return sub

    def check_tessel(self, n, text):
        words = words_of(text)
        sub = self.subcommand(words)
        if sub and sub[0] not in self.subcommands():
            self.fail(n, f"`tessel {sub[0]}` is not a command of this tessel (tessel --help)")
            return
        rc, out = self.help(sub)
        if rc != 0:
            self.fail(n, f"`tessel {' '.join(sub)}` is not a command of this tessel: {out.strip()[:200]}")
            return
        known = set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", out)) | set(
            re.findall(r"(?:^|[\s,])(-[a-zA-Z])\b", out))
        for w in words[1 + len(sub):]:
            for flag in re.findall(r"(?:^|[\[(|])(--?[a-zA-Z][a-z0-9-]*)", w):
                if flag not in known:
                    self.fail(n, f"`tessel {' '.join(sub)}` has no flag {flag} "
                                 f"(tessel {' '.join(sub)} --help)")

    def check_bench(self, n, text):
        words = words_of(text)
        name = words[0]
        src = None
        for f in os.listdir(os.path.join(self.root, "bench")):
            p = os.path.join(self.root, "bench", f)
            if f.endswith(".cc") and re.search(r"^// " + re.escape(name) + r"\b", open(p).read(),
                                               re.M):
                src = p
        if src is None:
            self.fail(n, f"{name}: no program under bench/ says it is {name}")
            return
        header = "".join(l for l in open(src).read().splitlines(True)[:40] if l.startswith("//"))
        for i, w in enumerate(words[1:], 1):
            if not w.startswith("--"):
                continue
            flag = w.split("=", 1)[0]
            if flag not in header:
                self.fail(n, f"{name} has no flag {flag} (see the header of "
                             f"{os.path.relpath(src, self.root)})")
            elif (flag + "=") in header and "=" not in w:
                self.fail(n, f"{name} parses {flag}=VALUE only: `{w} {words[i + 1] if i + 1 < len(words) else ''}` "
                             f"is rejected")

    def check_make(self, n, text):
        target = words_of(text)[1]
        makefile = open(os.path.join(self.root, "Makefile")).read()
        if not re.search(r"^" + re.escape(target) + r":", makefile, re.M):
            self.fail(n, f"make {target}: no such target in the Makefile")

    def check_table(self, readme):
        """Every flag of each subcommand appears in its row of the command table."""
        rows = {}
        for n, raw in enumerate(readme.splitlines(), 1):
            if not raw.startswith("| `tessel "):
                continue
            for span in re.findall(r"`(tessel [^`]+)`", raw.split(" | ", 1)[0]):
                words = words_of(span)
                sub = tuple(self.subcommand(words))
                rows.setdefault(sub, []).append((n, raw))
        for sub, entries in rows.items():
            rc, out = self.help(list(sub))
            if rc != 0:
                continue
            text = " ".join(raw for _, raw in entries)
            for short, flag in sorted(set(re.findall(r"^\s+(?:(-\w),)?(--[a-z0-9][a-z0-9-]*)", out,
                                                     re.M))):
                if flag in ("--help",) or flag in CONNECTION_FLAGS:
                    continue
                if short and re.search(r"(?<![\w-])" + re.escape(short) + r"(?![\w-])", text):
                    continue
                if not re.search(re.escape(flag) + r"(?![a-z0-9-])", text):
                    self.fail(entries[0][0], f"the command table's row of `tessel {' '.join(sub)}` "
                                             f"does not mention {flag}, which it has")

    def check_links(self, readme):
        for n, raw in enumerate(readme.splitlines(), 1):
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", raw):
                if re.match(r"[a-z]+://", target):
                    continue
                path = os.path.normpath(os.path.join(self.root, target))
                if not path.startswith(os.path.abspath(self.root) + os.sep):
                    self.fail(n, f"the link {target} leaves the repository")
                elif not os.path.exists(path):
                    self.fail(n, f"the link {target} names no file")

    def run_real(self, n, text):
        words = words_of(text)
        r = subprocess.run([self.tessel] + words[1:], capture_output=True, text=True, timeout=120,
                           cwd=self.root)
        if r.returncode != 0:
            self.fail(n, f"`{text}` failed ({r.returncode}): {(r.stdout + r.stderr).strip()[:300]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true",
                    help="also check that drifted copies of the README are caught")
    a = ap.parse_args()
    a.root = os.path.abspath(a.root)
    a.tessel = os.path.abspath(a.tessel)
    readme = open(os.path.join(a.root, "README.md")).read()
    problems = check(a.root, a.tessel, readme)
    if a.self_test and not problems:
        problems = self_test(a.root, a.tessel, readme)
    for p in problems:
        print(f"readme check: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"readme check: the commands of README.md agree with {a.tessel}" +
          (" (self-test passed)" if a.self_test else ""))
    return 0


# Drifts the check must catch: (text appended to or replaced in the README, what it must say).
DRIFTS = [
    ("\n```\ntessel tune --no-such-flag 3\n```\n", "`tessel tune` has no flag --no-such-flag"),
    ("\nRun `tessel frobnicate --db FILE`.\n", "`tessel frobnicate` is not a command"),
    ("\n```\ntessel_bench_search --db FILE --workload=SPEC\n```\n",
     "tessel_bench_search parses --db=VALUE only"),
    ("\nThen `make deploy-everything`.\n", "make deploy-everything: no such target"),
    ("\nSee [the design](../shared/DESIGN.md).\n", "the link ../shared/DESIGN.md leaves the repository"),
    ([("[--skip-verify] ", ""), ("`--skip-verify` times without checking; ", "")],
     "the command table's row of `tessel measure` does not mention --skip-verify"),
]


def self_test(root, tessel, readme):
    failures = []
    for change, expect in DRIFTS:
        text = readme + change if isinstance(change, str) else readme
        if not isinstance(change, str):
            for old, new in change:
                if old not in text:
                    failures.append(f"self-test: the README no longer holds {old!r}")
                text = text.replace(old, new, 1)
        got = check(root, tessel, text)
        if not any(expect in g for g in got):
            failures.append(f"self-test: a README with {change!r} was not caught (want {expect!r}; "
                            f"got {got})")
    return failures


def check(root, tessel, readme):
    c = Check(root, tessel)
    found = commands(readme)
    for n, text, in_code in found:
        if text.startswith("tessel_bench_"):
            c.check_bench(n, text)
        elif text.startswith("tessel "):
            c.check_tessel(n, text)
            words = words_of(text)
            if in_code and words[1] in ("lower", "--version") and "SPEC" not in text and "FILE" not in text \
                    and "my_kernel" not in text and "|" not in text and "[" not in text:
                c.run_real(n, text)
        elif text.startswith("make "):
            c.check_make(n, text)
    c.check_table(readme)
    c.check_links(readme)
    return c.problems


if __name__ == "__main__":
    sys.exit(main())
