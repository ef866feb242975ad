#!/usr/bin/env python3
"""Fails when a comment or a document names a file or a code name that does not exist.

Scanned: the comments of C/C++/CUDA sources and headers, CMake files, shell and Python scripts
(comments and docstrings) and YAML files, and the whole text of docs/*.md and README.md.
A finding is one of:
  - a path: `engine/pipeline.c`, `tests/gpu/emu`, `cuda/gpu_backend.c` or a bare file name with
    a source extension (`comm_nccl.c`) that no file or folder of the tree matches, from the
    root, the file's folder or one above it, or as a tail (`*` globs allowed; `engine/pipeline`
    may stand for engine/pipeline.c or .h);
  - a code name, a call (`pipeline_step()`) or a snake_case or UPPER_CASE name (`comm_split`,
    `PT_TAG_CHAIN_SUM`, test names) that occurs nowhere outside comments and documents (names
    CMake builds from a variable, gpu_gate_${name}, match as globs);
  - a spec key (`train.seq_len_schedule`) one of whose words no code mentions;
  - a member: `p->error` where p is declared in the same file with a struct type (a parameter
    `pt_pipeline *p`) that has no such member (`p->part.error` follows the path).
False positives are avoided by rule, not by listing: a name may drop its module prefix
(`begin_save` for checkpoint_begin_save, `RECV_ACT` for ACT_RECV_ACT); a snake_case or
UPPER_CASE word is taken for a code name only when it starts like a function or macro of the C
code (`pipeline_`, `PT_`), has no one-letter part (maths: x_i, S_0), and, for UPPER_CASE, is
not a placeholder (in a script's comment, inside "...", or on a usage line laid out in
columns). Library names (MPI, CUDA, NCCL, libyaml, cJSON, hwloc, OpenBLAS, torch) are known by
their prefixes below, system headers by the tree's #include <...> lines;
scripts/check_refs_allow.txt lists the few other genuine externals, each with its reason.
Usage: check_refs.py [--self-test] [REPO_ROOT]; prints `file:line: names X which does not
exist` per finding and exits 1 if any. --self-test first checks that a small fixture tree with
one dangling name of each kind is refused and its fixed twin accepted.
"""
import fnmatch
import io
import os
import re
import sys
import tempfile

# scripts/tokenize.py (the project's tokenizer) must not hide the standard library's module.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(
    os.path.abspath(__file__))]
import tokenize  # noqa: E402

C_EXT = (".c", ".h", ".cu", ".cuh", ".cpp", ".hpp")
HASH_EXT = (".sh", ".cmake", ".yaml", ".yml")
HASH_NAMES = ("CMakeLists.txt",)
SOURCE_EXT = ("c", "h", "cu", "cuh", "cpp", "hpp", "py", "sh", "cmake", "md")
# Data, not text anyone maintains: fuzz inputs, build trees, caches.
SKIP_DIRS = ("tests/fuzz/corpus", "tests/fuzz/crashers")
# Top-level outputs beside the build trees: the GPU kit (scripts/gpu_kit.sh), its check's logs.
TOP_OUTPUTS = ("kit", "gpu-check")
# Prefixes of names that libraries outside the tree define (their headers are not scanned).
EXTERNAL_PREFIXES = ("MPI_", "PMPI_", "OMPI_", "cuda", "CUDA_", "cublas", "CUBLAS_", "nccl",
                     "NCCL_", "yaml_", "YAML_", "cJSON", "hwloc_", "HWLOC_", "openblas_",
                     "OPENBLAS_", "cblas_", "CBLAS_", "torch", "__")

WORD = r"[A-Za-z_][A-Za-z0-9_]*"
IDENT = re.compile(WORD)
URL = re.compile(r"\b(?:https?|file)://\S+")
PATHLIKE = re.compile(r"(?<![A-Za-z0-9_./*$~-])([A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)*/?)")
CALL = re.compile(r"(?<![\w.>$])(\*?" + WORD + r"\*?)\(\)")
SNAKE = re.compile(r"(?<![\w./$*-])([a-z*][a-z0-9*]*(?:_[a-z0-9*]+)+)(?![\w(/*-]|\.\w)")
MACRO = re.compile(r"(?<![\w./$*-])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w(/-]|\.\w)")
MEMBER = re.compile(r"(?<![\w.>])(" + WORD + r")((?:->" + WORD + r")(?:(?:->|\.)" + WORD + r")*)")
GENERATED = re.compile(r"[A-Za-z0-9_]*(?:\$\{\w+\}[A-Za-z0-9_]*)+")
BACKTICK = re.compile(r"`([^`\n]+)`")
SECTION = re.compile(r"spec_section\(\s*\w+->root,\s*\"(\w+)\"")


def walk(root):
    """Every file under root (relative paths, sorted), skipping build trees and hidden folders."""
    out = []
    for folder, dirs, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        rel = "" if rel == "." else rel
        dirs[:] = sorted(d for d in dirs if not (
            (d.startswith(".") and d != ".ci") or d == "__pycache__" or d.startswith("venv")
            or (rel == "" and (d.startswith("build") or d in TOP_OUTPUTS))))
        out += [os.path.join(rel, n) for n in sorted(names)]
    return out


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


# A comment, or a string or character literal (skipped whole: "/*" inside one is no comment).
C_TOKEN = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?",
                     re.S)


def split_c(text):
    """(comments as [(line, text)], code with comments blanked) of a C-like source."""
    comments, code, last = [], [], 0
    for m in C_TOKEN.finditer(text):
        tok = m.group(0)
        if tok[0] != "/":
            continue
        comments.append((text.count("\n", 0, m.start()) + 1, tok))
        code.append(text[last:m.start()])
        code.append("\n" * tok.count("\n"))
        last = m.end()
    code.append(text[last:])
    return comments, "".join(code)


def split_hash(text):
    """Comments and code of a shell, CMake or YAML file: `#` at a word start outside quotes."""
    comments, code, quote = [], [], None
    for lineno, raw in enumerate(text.split("\n"), 1):
        cut = None
        for k, ch in enumerate(raw):
            if quote:
                if ch == quote and (k == 0 or raw[k - 1] != "\\"):
                    quote = None
            elif ch in "\"'" and (k == 0 or raw[k - 1] != "\\"):
                quote = ch
            elif ch == "#" and (k == 0 or raw[k - 1] in " \t;("):
                cut = k
                break
        if cut is None:
            code.append(raw)
        else:
            comments.append((lineno, raw[cut:]))
            code.append(raw[:cut])
    return comments, "\n".join(code)


def split_py(text):
    """Comments and docstrings of a Python file, and the rest of its text."""
    comments, code, prev = [], [], tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                comments.append((tok.start[0], tok.string))
            elif (tok.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT,
                                                         tokenize.DEDENT, tokenize.NL)
                  and tok.string.lstrip("rbuRBU")[:3] in ('"""', "'''")):
                comments.append((tok.start[0], tok.string))
            else:
                code.append(tok.string)
            if tok.type not in (tokenize.COMMENT, tokenize.NL):
                prev = tok.type
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return split_hash(text)
    return comments, " ".join(code)


def split(rel, text):
    """(comments, code) of one file, or None when it is not scanned at all."""
    base = os.path.basename(rel)
    if rel.endswith(C_EXT):
        return split_c(text)
    if rel.endswith(".py"):
        return split_py(text)
    if rel.endswith(HASH_EXT) or base in HASH_NAMES or text.startswith("#!"):
        return split_hash(text)
    if rel.endswith(".md") and (rel == "README.md" or rel.startswith("docs/")):
        return [(1, text)], ""
    return None


def parse_structs(code):
    """{type name: {member: member type name or None}} from the struct and union bodies."""
    structs = {}

    def body_fields(body):
        fields, depth, start = {}, 0, 0
        for k, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == ";" and depth == 0:
                decl = body[start:k]
                inner = None
                if "{" in decl:
                    inner = body_fields(decl[decl.index("{") + 1:decl.rindex("}")])
                    decl = decl[:decl.index("{")] + decl[decl.rindex("}") + 1:]
                decl = re.sub(r"\[[^\]]*\]", "", decl)
                fp = re.search(r"\(\s*\*\s*(" + WORD + r")\s*\)", decl)
                if fp:
                    fields[fp.group(1)] = None
                else:
                    words = IDENT.findall(decl.split(",")[0])
                    typ = words[-2] if len(words) >= 2 else None
                    for part in decl.split(","):
                        w = IDENT.findall(part.split(":")[0])
                        if w:
                            fields[w[-1]] = inner if inner is not None else typ
                start = k + 1
        return fields

    for m in re.finditer(r"\b(?:struct|union)\s*(" + WORD + r")?\s*\{", code):
        depth, k = 1, m.end()
        while k < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            k += 1
        fields = body_fields(code[m.end():k - 1])
        if m.group(1):
            structs.setdefault(m.group(1), {}).update(fields)
        alias = re.match(r"\s*(" + WORD + r")\s*;", code[k:])
        if alias and code[max(0, m.start() - 8):m.start()].strip().endswith("typedef"):
            structs.setdefault(alias.group(1), {}).update(fields)
    return structs


def declared_vars(code, structs):
    """{variable: struct type} for the names declared in code with exactly one struct type."""
    seen = {}
    for m in re.finditer(r"\b(" + WORD + r")\s*(?:\bconst\b\s*)?\*?\s*(?:\bconst\b\s*)?\*?\s*("
                         + WORD + r")\s*[,;)=\[]", code):
        if m.group(1) in structs:
            seen.setdefault(m.group(2), set()).add(m.group(1))
    return {v: next(iter(t)) for v, t in seen.items() if len(t) == 1}


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = walk(root)
        self.paths = set(self.files)
        for f in self.files:
            parts = f.split("/")
            self.paths.update("/".join(parts[:k]) for k in range(1, len(parts)))
        self.suffixes = {p.split("/", k)[k] for p in self.paths
                         for k in range(1, p.count("/") + 1)}
        self.top = {p for p in self.paths if "/" not in p and p not in self.files}
        self.dirnames = {p.rsplit("/", 1)[-1] for p in self.paths if p not in self.files}
        self.basenames = {f.rsplit("/", 1)[-1] for f in self.files}
        self.scanned, self.names, self.code, self.generated = [], set(), {}, set()
        self.external_headers = set()
        for rel in self.files:
            if any(rel.startswith(d + "/") for d in SKIP_DIRS):
                continue
            text = read(root, rel)
            if text is None:
                continue
            parts = split(rel, text)
            if parts is None:
                if not rel.endswith(".md"):
                    self.names.update(IDENT.findall(text))
                continue
            comments, code = parts
            self.scanned.append((rel, comments))
            self.names.update(IDENT.findall(code))
            # Names built by CMake or shell from a variable (gpu_gate_${name}) match as globs.
            for g in GENERATED.findall(code):
                pat = re.sub(r"\$\{\w+\}", "*", g)
                if len(pat.replace("*", "")) >= 5:
                    self.generated.add(pat)
            if rel.endswith(C_EXT):
                self.code[rel] = code
                for h in re.findall(r"#\s*include\s*<([^>]+)>", code):
                    self.external_headers.add(h)
                    self.external_headers.add(h.rsplit("/", 1)[-1])
        self.names.update(f.rsplit("/", 1)[-1].split(".")[0] for f in self.files)
        self.names.update(self.table_tests(root))
        # Comments drop a module prefix (begin_save for checkpoint_begin_save, RECV_ACT for
        # ACT_RECV_ACT): any _-suffix of a name counts, and for UPPER names any _-run of parts.
        self.parts = set()
        self.prefixes = set()
        for n in self.names:
            w = n.split("_")
            if len(w) < 2:
                continue
            if n.isupper():
                self.parts.update("_".join(w[i:j]) for i in range(len(w))
                                  for j in range(i + 2, len(w) + 1))
            else:
                self.parts.update("_".join(w[i:]) for i in range(1, len(w) - 1))
        for code in self.code.values():
            calls = re.findall(r"\b([a-z]+_\w+)\s*\(", code)
            macros = re.findall(r"\b([A-Z]+_[A-Z0-9_]+)\b", code)
            self.prefixes.update(m.split("_")[0] for m in calls + macros
                                 if not m.startswith(EXTERNAL_PREFIXES))
        # The spec's top-level sections (model, train, ...): `train.steps` names a spec key.
        self.sections = set()
        for code in self.code.values():
            self.sections.update(SECTION.findall(code))
        self.spec_key = re.compile(r"(?<![\w.>$/-])(?:" + "|".join(sorted(self.sections)) +
                                   r")((?:\.\w+)+)") if self.sections else None
        self.structs = parse_structs("\n".join(self.code[r] for r in sorted(self.code)))
        self.allow = set()
        allow = read(root, "scripts/check_refs_allow.txt") or ""
        for line in allow.split("\n"):
            line = line.split("#", 1)[0].strip()
            if line:
                self.allow.add(line)


    def table_tests(self, root):
        """Test names CMake registers from table rows: pt_gate_table(DIR/gates.txt PREFIX) makes
        PREFIX + the row's first column, and foreach(v a b) add_test(NAME x_${v}) makes x_a, x_b."""
        names = set()
        for rel in self.files:
            if not rel.endswith(("CMakeLists.txt", ".cmake")):
                continue
            text = read(root, rel) or ""
            folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
            for table, prefix in re.findall(r"pt_gate_table\(\$\{CMAKE_CURRENT_SOURCE_DIR\}/(\S+)\s+(\w+)", text):
                rows = read(root, f"{folder}/{table}" if folder else table) or ""
                for line in rows.splitlines():
                    if line.strip() and not line.startswith(("#", "let ")):
                        names.add(prefix + line.split("|")[0].strip())
            for var, values, body in re.findall(r"foreach\((\w+)\s+([^)]*)\)(.*?)endforeach", text, re.S):
                for pat in re.findall(r"NAME\s+(\w*\$\{" + var + r"\}\w*)", body):
                    names.update(pat.replace("${" + var + "}", v) for v in values.split())
        return names
    def path_exists(self, path, here):
        path = path.rstrip("/")
        if not path or path in (".", "..") or path in self.allow:
            return True
        if path.startswith(("_", "-")):  # the second of "ops_attention_flash_fwd.cu, _bwd.cu"
            return any(b.endswith(path.rsplit("/", 1)[-1]) for b in self.basenames)
        # From the root, or from the file's folder or one above it (a nested project's root).
        cands, folder = [path], os.path.dirname(here)
        while folder:
            cands.append(os.path.normpath(os.path.join(folder, path)))
            folder = os.path.dirname(folder)
        if "/" not in path:
            names = self.basenames | self.dirnames
            return any(fnmatch.fnmatchcase(b, path) for b in names) if "*" in path \
                else path in names or path in self.external_headers
        for c in cands:
            if c in self.paths or any(c + "." + e in self.paths for e in SOURCE_EXT):
                return True
            if "*" in c and any(fnmatch.fnmatchcase(p, c) for p in self.paths):
                return True
        if path.split("/")[0] in self.top:
            return False
        # A path relative to some folder (cuda/gpu_backend.c, emu/src): a suffix of a tree path.
        if "*" in path:
            return any(fnmatch.fnmatchcase(p, "*/" + path) for p in self.paths)
        return path in self.suffixes or path in self.external_headers

    def name_exists(self, name):
        if name in self.allow or name.startswith(EXTERNAL_PREFIXES):
            return True
        if "*" in name:
            return any(fnmatch.fnmatchcase(n, name) for n in self.names) or any(
                fnmatch.fnmatchcase(name.replace("*", "x"), g) for g in self.generated)
        return name in self.names or name in self.parts or any(
            fnmatch.fnmatchcase(name, g) for g in self.generated)

    def is_code_name(self, name, upper_too):
        """Whether a snake_case or UPPER_CASE word of a comment is meant as a code name: not
        maths (x_i, S_0: a one-letter part), and it starts like a function or a macro of the C
        code (pipeline_..., tag_..., PT_...), else it is a word or a placeholder (fan_in,
        FILE_SIZE)."""
        parts = name.replace("*", "").split("_")
        if any(len(w) < 2 for w in parts if w) or not name.replace("*", ""):
            return False
        if (name.isupper() or name[0].isupper()) and not upper_too:
            return False
        return parts[0] in self.prefixes

    def is_path_ref(self, tok):
        """Whether tok looks like a path into this tree rather than prose (and/or, F/I/W)."""
        if "/" in tok:
            first = tok.split("/")[0]
            last = tok.rstrip("/").rsplit("/", 1)[-1]
            return first in self.top or "." in last and last.rsplit(".", 1)[1] in SOURCE_EXT \
                or first in self.dirnames and tok.endswith("/")
        stem, _, ext = tok.rpartition(".")
        return ext in SOURCE_EXT and stem != "" and "." not in stem  # not spec keys (a.b.c)


def placeholder(text, pos):
    """Whether an UPPER_CASE word at pos is a placeholder of a usage block or a quoted format:
    inside "..." on its line, or on a line laid out in columns (two spaces between words)."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start:len(text) if end < 0 else end]
    return text[start:pos].count('"') % 2 == 1 or re.search(r"\S  +\S", line.strip(" */#")) \
        is not None


def check_text(tree, rel, line0, text, markdown, vars_):
    found = []
    # UPPER_CASE words in scripts' comments are mostly arguments and environment variables of
    # their usage lines (REPO_ROOT, MICRO_BATCHES); in C comments and docs they are macros.
    upper_too = markdown or rel.endswith(C_EXT)

    def add(pos, name):
        found.append((line0 + text.count("\n", 0, pos), name))

    text = URL.sub(lambda m: " " * len(m.group(0)), text)
    if markdown:
        text = re.sub(r"\]\((?:https?:|#)[^)]*\)", lambda m: " " * len(m.group(0)), text)
    for m in PATHLIKE.finditer(text):
        tok = m.group(1).rstrip(".-")
        if tree.is_path_ref(tok) and not tree.path_exists(tok, "docs/x" if markdown and
                                                             rel.startswith("docs/") else rel):
            add(m.start(1), tok)
    for m in CALL.finditer(text):
        if not tree.name_exists(m.group(1)):
            add(m.start(1), m.group(1) + "()")
    spans = [(m.start(1), m.group(1)) for m in BACKTICK.finditer(text)] if markdown \
        else [(0, text)]
    for off, span in spans:
        for rx in (SNAKE, MACRO):
            for m in rx.finditer(span):
                name = m.group(1)
                if rx is MACRO and placeholder(span, m.start(1)):
                    continue
                if tree.is_code_name(name, upper_too) and not tree.name_exists(name):
                    add(off + m.start(1), name)
        for m in tree.spec_key.finditer(span) if tree.spec_key else ():
            keys = m.group(1).split(".")[1:]
            if keys[-1] in SOURCE_EXT:
                continue
            for key in keys:
                if not key.isdigit() and key not in tree.names:
                    add(off + m.start(0), m.group(0))
                    break
        for m in MEMBER.finditer(span):
            typ = vars_.get(m.group(1))
            chain = re.split(r"->|\.", m.group(2))[1:]
            for member in chain:
                fields = tree.structs.get(typ) if isinstance(typ, str) else typ
                if not fields:
                    break
                if member not in fields:
                    add(off + m.start(1), m.group(1) + m.group(2))
                    break
                typ = fields[member]
    return found


def check(root):
    tree = Tree(root)
    findings = set()
    for rel, comments in tree.scanned:
        markdown = rel.endswith(".md")
        arrows = rel.endswith(C_EXT) and any("->" in text for _, text in comments)
        vars_ = declared_vars(tree.code[rel], tree.structs) if arrows else {}
        for line0, text in comments:
            for line, name in check_text(tree, rel, line0, text, markdown, vars_):
                findings.add((rel, line, name))
    return tree, sorted(findings)


FIXTURE = {
    "core/util.h": "/* core/util.h: util_add_one() adds one; see core/util.c and docs/u.md.\n"
                   " * Bits: UTIL_MAX_BITS. The box's box->count, h->inner.n. */\n"
                   "#define UTIL_MAX_BITS 8\n"
                   "typedef struct { int n; } pt_inner;\n"
                   "typedef struct { int count; pt_inner inner; } pt_box;\n"
                   "int util_add_one(int x);\nint util_fill(pt_box *box, pt_box *h);\n",
    "core/util.c": "#include <stdio.h>\n/* MPI_Allreduce() and cudaMemcpy() are not ours;"
                   " stdio.h neither. train.steps is a key. */\n"
                   "int util_add_one(int x) { return x + 1; }\n"
                   "void util_load(pt_box *s) { spec_section(s->root, \"train\", \"steps\"); }\n",
    "docs/u.md": "# u\n`util_add_one()` in [util.c](../core/util.c), `core/`, and/or F/I/W.\n",
    "CMakeLists.txt": "# builds core/util.c (scripts/run.sh runs it)\n"
                      "add_library(core core/util.c)\n",
    "scripts/run.sh": "#!/bin/sh\n# runs util_fill\necho '#not a comment' $#\n",
}
BROKEN = {
    "core/util.h": ("see core/util.c", "see core/utils.c"),
    "core/util.c": ("are not ours;",
                    "are not ours; util_add_two(), UTIL_MIN_BITS, train.stepz are gone;"),
    "docs/u.md": ("`core/`", "`core/`, `util_sub_one`, comm_x.c"),
    "CMakeLists.txt": ("scripts/run.sh", "scripts/run.py"),
    "scripts/run.sh": ("runs util_fill", "runs util_fill and util_drain (NOT_CHECKED)"),
}
BROKEN_MEMBER = ("box->count", "box->error")
EXPECTED = {"core/utils.c", "util_add_two()", "util_sub_one", "comm_x.c", "scripts/run.py",
            "UTIL_MIN_BITS", "util_drain", "box->error", "train.stepz"}


def self_test():
    """The check accepts the clean fixture and reports each planted dangling name."""
    with tempfile.TemporaryDirectory() as d:
        for rel, text in FIXTURE.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                f.write(text)
        _, clean = check(d)
        if clean:
            print("check_refs: self-test: the clean fixture was refused:", clean)
            return False
        for rel, (old, new) in BROKEN.items():
            text = FIXTURE[rel].replace(old, new)
            if rel == "core/util.h":
                text = text.replace(*BROKEN_MEMBER)
            with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                f.write(text)
        _, broken = check(d)
        got = {name for _, _, name in broken}
        if got != EXPECTED:
            print(f"check_refs: self-test: expected findings {sorted(EXPECTED)}, got {broken}")
            return False
    return True


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        args = args[1:]
        if not self_test():
            return 1
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    tree, findings = check(root)
    if not tree.scanned:
        print(f"check_refs: no sources found under {root}", file=sys.stderr)
        return 1
    lines = [f"{rel}:{line}: names {name} which does not exist" for rel, line, name in findings]
    lines.append(f"check_refs: {len(tree.scanned)} files, {len(findings)} dangling reference(s)")
    print("\n".join(lines))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
