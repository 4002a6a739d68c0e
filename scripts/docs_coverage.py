"""Nothing of the old documentation lost: every sentence, table row and code line of the docs as
they were at a git ref is findable in today's pages.

    .venv/bin/python scripts/docs_coverage.py [--ref REF] [--verbose]

The old files are README.md and docs/*.md at REF (by default the parent of the commit that
removed docs/operations.md, the one long guide the site replaced; before that commit, HEAD).
Today's pages are README.md, docs/**/*.md and the reference pages the site writes from the code
(docs/hooks/reference.py). Both sides are normalized alike: whitespace collapsed, a link kept as
its text (pages and anchors moved), emphasis marks and list markers dropped. Headings are not
checked (the pages' structure changed on purpose). Then each old piece is, in order:

- found: its text is in today's pages, as it was;
- in the reference: a row of a hand-written flag table (first column `flag`), whose flags the
  generated reference lists; each clause of its meaning must be in the flag's rows of the
  reference or in a piece of today's pages that names the flag (most of its words), else the row
  is missing;
- reworded: a piece of today's pages of the same kind says nearly the same (difflib's ratio at
  least 0.8: a link's words, a page's name);
- removed on purpose: none of the above, and it holds one of REMOVED's fragments, each with its
  reason;
- gone with the code: none of the above, a piece of the architecture page (which describes the
  code) naming a module, a file or a name that no file of the repository has any more, or a line
  of a diagram that names one (the roll's code was rearranged after the site was made: issue
  51); the page says what is there now;
- missing: exit 1, each listed.

Exit 0 when nothing is missing. --verbose lists the reworded pieces, what is in the reference,
and the removals.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD_GUIDE = "docs/operations.md"

# Fragments of old pieces removed on purpose, and why.
REMOVED: dict[str, str] = {
    "How to deploy and run rollguard's agent, roller, collector and report, what each flag does": (
        "the old guide's summary of itself: the site's home page says what each page is for"
    ),
    "From nothing to a rolled cluster:": "the walkthrough's lead-in, now its heading",
    "All flags are listed in the README;": (
        "a pointer to the README's flag table, which the generated reference replaced: the "
        "sentence now points there"
    ),
    "The job's flags and outputs are in operations.md": (
        "a pointer to the old guide: the sentence now names the page the section moved to"
    ),
    "| `--retry-*` | see README |": (
        "a flag-table row: the five retry flags are in each command's reference, the policy in "
        "Reference, Retries"
    ),
    "The other flags of `roll` and `plan`:": (
        "a flag table's lead-in: the table is the generated reference now"
    ),
    "Every `rollguard connect ...` and `rollguard mm2 ...` command takes:": (
        "a flag table's lead-in: the sentence now lists the flags, the table is the generated "
        "reference"
    ),
    "operations.md": (
        "a pointer to the old guide, whose sections are pages of the site now: each page links "
        "where its section went"
    ),
    "docs/architecture.md: components, data flow": (
        "the README's list of the old docs: the site's navigation and the README's list of its "
        "pages replace it"
    ),
    "docs/benchmarks.md: measured figures": "the same list",
    "docs/library.md: rollguard.roller as a typed library": "the same list",
    # Facts that changed with the code after the site was made (issue 51), said anew.
    "`Voice`: what each look at a node means, said (the live view": (
        "the voice's row as the code is now: it says what a step's Outcome says; its EventLog "
        "half is in the row as it was"
    ),
    "| `rollguard.roller.roll.roller` | the loop above: observe, step, act; the one place a": (
        "the loop's row as the code is now: the loop, plan as its first look; where an error is "
        "judged is the effects' row and 'The roll loop on one page'"
    ),
    "| roll journal (versioned JSON, atomic, a file or a ConfigMap) |": (
        "the journal's row, its version 2 (each node's record) added to the same words"
    ),
    "`plan()`: the plan as data from the same `Observer`, writing nothing": (
        "planning's row as the code is now: a plan is the loop's first look, planning.py its "
        "applier that notes the effects (Planned); plan() is in the loop's row"
    ),
    "`plan_batches` repeats `next_batch` on one view for `rollguard plan`.": (
        "said again with the loop's plan beside it ('... the loop's plan does the same')"
    ),
    "The journal's format stays version 1: `batch` is an optional key.": (
        "no longer true: the journal is version 2 (each node's record), version 1 read and "
        "migrated (the stores row, Failures: Journal, resume, events)"
    ),
    "`processes`: the one registry of the processes a test starts": (
        "split as the test peers were: the registry is spawn's (its own item, the same words), "
        "the port helper and the start-up slots processes' (their own item)"
    ),
    "`--output json`: the same, one object a node, with `why`, `position`, `order` and": (
        "corrected (issue 53: the plan's JSON has node and nodeId too): A first roll on VMs, "
        "Plan, lists every field"
    ),
    "Before a restart the node's intent is written to the journal; after the node is ready": (
        "said with the node's record (Failures: Journal, resume, events: 'before a restart the "
        "node's intent is written to it; after the node is back, its outcome')"
    ),
}


# The page whose pieces describe the code itself: what it names may be gone with the code.
ABOUT_THE_CODE = "docs/architecture.md"
NAME = re.compile(
    r"\brollguard(?:\.\w+)+|[A-Za-z_]\w*\.py\b|\b_?[a-z]+_[a-z_]+\b|\b_[a-z]+\b"
    r"|\b[A-Z][a-z]+[A-Z]\w*\b"
)


class Code:
    """Every file's name and every word of the repository's Python, to ask whether a name an
    old piece of the architecture page gives is still there."""

    def __init__(self) -> None:
        files = git("ls-files", "*.py").split()
        self.files = {Path(f).name for f in files}
        self.modules = set()  # rollguard.roller.roll.looks, from .../src/rollguard/...
        for f in files:
            if "/src/rollguard/" in f:
                dotted = "rollguard." + f.split("/src/rollguard/", 1)[1].removesuffix(".py")
                self.modules.add(dotted.replace("/", ".").removesuffix(".__init__"))
        self.words: set[str] = set()
        for f in files:
            self.words.update(re.findall(r"\w+", (ROOT / f).read_text(errors="replace")))

    def gone(self, text: str) -> list[str]:
        """The names in `text` that the code no longer has."""
        lost = []
        for name in dict.fromkeys(NAME.findall(text)):
            if name.startswith("rollguard."):
                there = name in self.modules
            elif name.endswith(".py"):
                there = name in self.files
            else:
                there = name in self.words
            if not there:
                lost.append(name)
        return lost


@dataclass(frozen=True)
class Piece:
    kind: str  # sentence, row, code
    text: str  # normalized
    where: str  # file:line of the old piece
    flags: tuple[str, ...] = ()  # a flag table's row: the flags of its first cell
    meaning: str = ""  # and its meaning cell
    block: int = 0  # a code line's: the line its fenced block opens at


LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"*])")


def normalize(text: str) -> str:
    text = LINK.sub(r"\1", text)
    text = text.replace("**", "").replace("<br>", " ")
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", text)
    return re.sub(r"\s+", " ", text).strip()


def pieces(text: str, name: str) -> Iterator[Piece]:
    """The checked pieces of one Markdown file."""
    fenced, paragraph, table_head = False, [], None
    start = block = 0

    def flush() -> Iterator[Piece]:
        if paragraph:
            joined = normalize(" ".join(line.strip() for line in paragraph))
            for sentence in SENTENCE_END.split(joined):
                if len(sentence) > 2:
                    yield Piece("sentence", sentence, f"{name}:{start}")
            paragraph.clear()

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            yield from flush()
            fenced, block = not fenced, number
            continue
        if fenced:
            if stripped:
                yield Piece("code", normalize_code(stripped), f"{name}:{number}", block=block)
            continue
        if stripped.startswith("|"):
            yield from flush()
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if table_head is None:
                table_head = cells
            elif not all(set(c) <= set("-: ") for c in cells):
                yield row_piece(cells, table_head, f"{name}:{number}")
            continue
        table_head = None
        if not stripped or stripped.startswith("#"):
            yield from flush()
            continue
        if re.match(r"(?:[-*+]|\d+\.)\s", stripped):  # a list item starts a paragraph
            yield from flush()
        if not paragraph:
            start = number
        paragraph.append(line)
    yield from flush()


def normalize_code(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def row_piece(cells: list[str], head: list[str], where: str) -> Piece:
    text = "| " + " | ".join(normalize(c) for c in cells) + " |"
    if head and head[0].lower().startswith("flag") and len(cells) >= 2:
        flags = tuple(re.findall(r"`(--[a-z0-9-]+)", cells[0].replace("\\|", "|")))
        if flags:
            return Piece("row", text, where, flags, normalize(cells[-1]))
    return Piece("row", text, where)


def new_pages() -> dict[str, str]:
    """Today's pages: README.md, docs/**/*.md and the generated reference."""
    found = {"README.md": (ROOT / "README.md").read_text()}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if "hooks" not in path.parts:
            found[str(path.relative_to(ROOT))] = path.read_text()
    hooks = ROOT / "docs" / "hooks"
    sys.path.insert(0, str(hooks))
    spec = importlib.util.spec_from_file_location("docs_reference", hooks / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path, text in module.pages().items():
        found[f"docs/{path}"] = text
    return found


def old_pages(ref: str) -> dict[str, str]:
    names = git("ls-tree", "--name-only", ref, "README.md", "docs/").split()
    return {name: git("show", f"{ref}:{name}") for name in names if name.endswith(".md")}


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def default_ref() -> str:
    removed = git("log", "-1", "--format=%H", "--diff-filter=D", "--", OLD_GUIDE).strip()
    return f"{removed}^" if removed else "HEAD"


def words(text: str) -> set[str]:
    found = (w.strip(".-") for w in re.findall(r"[a-z0-9_.-]+", text.lower().replace("`", "")))
    return {w for w in found if len(w) > 3}


def clauses(meaning: str) -> list[str]:
    """The parts of a flag row's meaning worth checking one by one."""
    parts = re.split(r";|: |\(|\)|, or |\. ", meaning)
    return [p.strip(" .,") for p in parts if len(p.split()) >= 3]


class Corpus:
    def __init__(self, pages: dict[str, str]) -> None:
        self.pieces = [p for name, text in pages.items() for p in pieces(text, name)]
        self.text = "\n".join(p.text for p in self.pieces)
        self.lower = self.text.lower().replace("`", "")
        self.by_kind: dict[str, list[str]] = {}
        for piece in self.pieces:
            self.by_kind.setdefault(piece.kind, []).append(piece.text)
        reference = {n: t for n, t in pages.items() if n.startswith("docs/reference/")}
        self.help: dict[str, str] = {}  # a flag: every generated row that lists it
        for text in reference.values():
            for line in text.splitlines():
                for flag in re.findall(
                    r"`(--[a-z0-9-]+)[ `]", line.split("|")[1] if "|" in line else ""
                ):
                    self.help[flag] = self.help.get(flag, "") + " " + line.lower()

    def has(self, text: str) -> bool:
        return text in self.text

    def near(self, piece: Piece) -> str | None:
        mine = words(piece.text)
        best, score = None, 0.8
        for candidate in self.by_kind.get(piece.kind, []):
            theirs = words(candidate)
            if mine and len(mine & theirs) < 0.5 * len(mine):
                continue
            matcher = difflib.SequenceMatcher(None, piece.text, candidate, autojunk=False)
            if matcher.quick_ratio() > score and (ratio := matcher.ratio()) > score:
                best, score = candidate, ratio
        return best

    def in_reference(self, piece: Piece) -> list[str] | None:
        """None: a flag is not in the reference; else the clauses of its meaning found nowhere
        near it: neither in its rows of the reference, nor in a piece of today's pages that
        names it (most of their words, in any order)."""
        if not all(flag in self.help for flag in piece.flags):
            return None
        near = " ".join(self.help[flag] for flag in piece.flags)
        near += " ".join(p.text for p in self.pieces if any(f in p.text for f in piece.flags))
        known = words(near)
        lost = []
        for clause in clauses(piece.meaning):
            mine = words(clause)
            plain = clause.lower().replace("`", "")
            if plain.startswith("see ") or plain in self.lower:
                continue  # a pointer to another section, or said as it was
            if mine and len(mine & known) >= 0.7 * len(mine):
                continue
            if not mine and plain in near.lower().replace("`", ""):
                continue
            lost.append(clause)
        return lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", help="the git ref of the old docs (default: see above)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    ref = args.ref or default_ref()
    corpus = Corpus(new_pages())
    code = Code()
    found: dict[str, list[str]] = {
        k: [] for k in ("found", "reworded", "reference", "removed", "gone", "missing")
    }
    used: set[str] = set()
    for name, text in old_pages(ref).items():
        # A diagram of the code (a fenced block of the architecture page) naming anything that
        # is gone was drawn again for the code as it is: each of its lines goes with it.
        redrawn: dict[int, list[str]] = {}
        if name == ABOUT_THE_CODE:
            for piece in pieces(text, name):
                if piece.block and (lost := code.gone(piece.text)):
                    redrawn.setdefault(piece.block, []).extend(lost)
        for piece in pieces(text, name):
            if corpus.has(piece.text) or corpus.has(piece.text.lower()):
                found["found"].append(piece.where)
            elif piece.flags and (lost := corpus.in_reference(piece)) is not None:
                if lost:
                    found["missing"].append(
                        f"{piece.where}: {', '.join(piece.flags)}: not in "
                        f"the pages nor its help: {' / '.join(lost)}"
                    )
                else:
                    found["reference"].append(f"{piece.where}: {', '.join(piece.flags)}")
            elif (near := corpus.near(piece)) is not None:
                found["reworded"].append(
                    f"{piece.where}: {piece.text[:100]}\n    now: {near[:100]}"
                )
            elif (removal := next((f for f in REMOVED if f in piece.text), None)) is not None:
                used.add(removal)
                found["removed"].append(f"{piece.where}: {piece.text[:90]} -- {REMOVED[removal]}")
            elif name == ABOUT_THE_CODE and (
                lost := redrawn.get(piece.block) or code.gone(piece.text)
            ):
                found["gone"].append(f"{piece.where}: {piece.text[:90]} -- no {', '.join(lost)}")
            else:
                found["missing"].append(f"{piece.where}: [{piece.kind}] {piece.text}")
    unused = [f for f in REMOVED if f not in used]
    total = sum(len(v) for v in found.values())
    print(f"old docs at {ref}: {total} pieces (sentences, table rows, code lines)")
    for kind, entries in found.items():
        print(f"  {kind:9} {len(entries)}")
    for kind in ("reworded", "reference", "removed", "gone") if args.verbose else ("removed",):
        if found[kind]:
            print(f"\n{kind}:", *found[kind], sep="\n  ")
    if unused:
        print("\nREMOVED fragments that match nothing (remove them):", *unused, sep="\n  ")
    if found["missing"]:
        print("\nmissing:", *found["missing"], sep="\n  ")
    return 1 if found["missing"] or unused else 0


if __name__ == "__main__":
    sys.exit(main())
