"""The package's layout keeps its promises: dependencies point down the list of
DESIGN.md (layers know nothing of training, the model nothing of training or
inference), the searches and exporters probe no capabilities with `hasattr`,
no module or function outgrows a screen's worth of reading, no search or export
function takes more than eight parameters (options travel as `DecodeOptions`),
every engine's `translate` returns one type, no layer or model constructor takes more
than 14 parameters (a position scheme travels
as one object), no export module reaches into another's runtime, no module imports one that imports
it back (lazy imports too), and importing the package loads only what Keras needs
to load a saved model."""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "keras_transformer"

# Lower ranks are imported by higher ones, never the reverse.
RANKS = {
    "constants": 0,
    "errors": 0,
    "compat": 0,
    "files": 0,
    "validation": 0,
    "startup": 0,
    "lazy": 0,
    "memory": 0,
    "layers": 1,
    "models": 2,
    "training": 3,
    "text": 3,
    "datasets": 3,
    "inference": 4,
    "export": 5,
    "importers": 5,
    "beam": 6,
    "config": 6,
    "model_section": 6,
    "config_reference": 6,
    "run": 7,
    "workflow": 8,
    "cli": 8,
    "__init__": 9,
    "__main__": 9,
}


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def part(path):
    """The first component of a module's path inside the package: its rank's key."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported_parts(tree):
    """The package parts a module imports, anywhere in it (lazy imports too)."""
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
            if node.module == "keras_transformer":
                names = [f"keras_transformer.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith("keras_transformer."):
                yield name.split(".")[1]


def test_every_module_imports_only_what_sits_below_it():
    upward = []
    for path in modules():
        rank = RANKS[part(path)]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        above = {name for name in imported_parts(tree) if RANKS[name] > rank}
        if above:
            upward.append(f"{path.relative_to(PACKAGE)} (rank {rank}) imports {sorted(above)}")
    assert not upward


def test_the_model_does_not_import_training():
    for path in (PACKAGE / "models").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert "training" not in set(imported_parts(tree)), path.name


def test_searches_and_exporters_declare_capabilities_instead_of_probing_them():
    for folder in ("inference", "export"):
        for path in (PACKAGE / folder).rglob("*.py"):
            calls = [
                node
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr"
            ]
            assert not calls, f"{path.name}:{calls[0].lineno} calls hasattr"


def test_modules_and_functions_stay_short():
    for path in modules():
        source = path.read_text(encoding="utf-8")
        assert source.count("\n") <= 450, f"{path.name} has {source.count(chr(10))} lines"
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef):
                body = node.body
                has_docstring = isinstance(body[0], ast.Expr) and isinstance(
                    body[0].value, ast.Constant
                )
                first = body[1] if has_docstring and len(body) > 1 else body[0]
                lines = node.end_lineno - first.lineno + 1
                assert lines <= 80, f"{path.name}: {node.name} has a body of {lines} lines"


# The public search functions keep the parameters they had before the search objects.
COMPATIBILITY_WRAPPERS = {"greedy_search", "beam_search", "sample"}


def test_searches_and_exports_take_their_options_as_one_object():
    crowded = []
    for folder in ("inference", "export"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef) or node.name in COMPATIBILITY_WRAPPERS:
                    continue
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                names = [a.arg for a in arguments if a.arg not in ("self", "cls")]
                if len(names) > 8:
                    crowded.append(f"{path.name}: {node.name} takes {len(names)}")
    assert not crowded


def test_layers_and_models_take_their_settings_as_objects():
    """A position scheme is one argument of every layer that reads positions, so no
    constructor of `layers/` or `models/` grows past `Transformer`'s 14 parameters."""
    crowded = []
    for folder in ("layers", "models"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                for method in node.body:
                    if isinstance(method, ast.FunctionDef) and method.name == "__init__":
                        arguments = (
                            method.args.posonlyargs + method.args.args + method.args.kwonlyargs
                        )
                        if len(arguments) - 1 > 14:  # without self
                            crowded.append(f"{path.name}: {node.name} takes {len(arguments) - 1}")
    assert not crowded


def test_every_engine_returns_translations():
    """Each engine's `translate` (the `Translator`, every export's runtime) returns
    `Translations.of(...)`, the one result type of `inference/engine.py`."""
    engines, others = [], []
    for folder in ("inference", "export"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef) or "Protocol" in map(ast.unparse, node.bases):
                    continue
                for method in node.body:
                    if not (isinstance(method, ast.FunctionDef) and method.name == "translate"):
                        continue
                    engines.append(node.name)
                    returned = [n.value for n in ast.walk(method) if isinstance(n, ast.Return)]
                    if not returned or not all(
                        isinstance(value, ast.Call) and ast.unparse(value.func) == "Translations.of"
                        for value in returned
                    ):
                        others.append(f"{path.name}: {node.name}.translate")
    expected = {"Translator", "SavedModelTranslator", "LiteRTTranslator", "CTranslate2Translator"}
    assert set(engines) == expected and not others, (engines, others)


def test_no_export_module_imports_another_exports_runtime():
    folder = PACKAGE / "export"
    runtimes = {p.stem for p in folder.glob("*.py") if p.stem.endswith("_runtime")}
    assert runtimes  # every export that runs its files has a runtime module
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = path.stem.removesuffix("_runtime")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module.rsplit(".", 1)[-1]
                if module in runtimes and path.stem != "__init__":
                    assert module == f"{own}_runtime", f"{path.name} imports {node.module}"


def module_imports():
    """`{module: {package modules it imports}}`, lazy imports too; `from package import
    name` counts as an import of the module `package.name` where there is one."""

    def name_of(path):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    paths = {name_of(path): path for path in modules()}
    graph = {}
    for name, path in paths.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.module in paths:
                for alias in node.names:
                    inner = f"{node.module}.{alias.name}"
                    imported.add(inner if inner in paths else node.module)
        graph[name] = imported - {name}
    return graph


def test_no_module_imports_one_that_imports_it_back():
    graph = module_imports()
    assert len(graph) > 100 and "keras_transformer.export.litert_runtime" in graph
    circles = []
    for start in graph:  # a path from each module back to itself, depth first
        stack, seen = [(start, [start])], set()
        while stack:
            name, path = stack.pop()
            for nxt in graph[name]:
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not circles, circles[:3]


def test_importing_the_package_loads_what_keras_needs_and_the_rest_on_first_use():
    script = """
import sys, warnings
import keras_transformer as kt
loaded = sorted({m.split(".")[1] for m in sys.modules if m.startswith("keras_transformer.")})
print(loaded)
print(kt.Translator.__module__, kt.import_marian.__module__, kt.text.__name__)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    read = kt.run.read_marian
print(read is kt.importers.read_marian, [str(w.message) for w in caught])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded, modules_, moved = done.stdout.splitlines()[-3:]
    parts = set(ast.literal_eval(loaded))
    assert parts & {"inference", "export", "importers", "run", "datasets", "cli"} == set(), parts
    assert {"layers", "models", "training"} <= parts
    assert modules_.split() == [
        "keras_transformer.inference.translator",
        "keras_transformer.run.opus_mt",
        "keras_transformer.text",
    ]
    assert moved == (
        "True ['`keras_transformer.run.read_marian` is deprecated: use "
        "`keras_transformer.importers.read_marian`.']"
    )
