"""Every example of the README and the documentation site, run or parsed as written.

Each page's Python blocks run in order in one namespace (as a reader would run
them), in a directory of the page's own that holds the README main job's run
(`runs/numbers_de_en`) and parallel files (`data/{train,val}.{de,en}`). The
serving guide's gRPC call reaches an in-process server on localhost:8500 that
answers from the SavedModel the page exported. Every `keras-transformer`
command of a shell block is checked against the command line's own parser.
"""

import argparse
import ast
import os
import pathlib
import re
import shlex
import subprocess
import sys
from concurrent import futures

import pytest
import tensorflow as tf
from conftest import REPO
from markdown import PAGES, fenced_blocks
from opus_mt import write_opus_mt

from keras_transformer.cli.parser import parser
from keras_transformer.datasets import numbers_corpus


def uses_main_job(page):
    """Whether a page's Python examples use the README main job's run."""
    return any("runs/numbers_de_en" in code for _, code in fenced_blocks(page, "python"))


# The pages on the main job's run wait for it (conftest starts it first and runs them last).
PYTHON_PAGES = [
    pytest.param(page, marks=[pytest.mark.main_job] if uses_main_job(page) else [])
    for page in PAGES
    if fenced_blocks(page, "python")
]
GRPC_ADDRESS = "localhost:8500"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """`{train,val}.{de,en}`: 2,000 and 200 pairs of the built-in corpus."""
    directory = tmp_path_factory.mktemp("data")
    for split, size in (("train", 2000), ("val", 200)):
        corpus = numbers_corpus(split, "de", "en", limit=size)
        for lang, lines in (("de", corpus.sources), ("en", corpus.targets)):
            (directory / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@pytest.fixture
def workspace(request, data_dir, tmp_path, monkeypatch):
    """The working directory of one page's examples: `data/`, `runs/numbers_de_en`
    for the pages that use it (the README's main job then runs first, once), and an
    OPUS-MT directory `opus-mt-de-en` for those that import one."""
    (tmp_path / "data").symlink_to(data_dir)
    page = request.node.callspec.params["page"]
    if any("opus-mt-de-en" in code for _, code in fenced_blocks(page, "python")):
        write_opus_mt(tmp_path / "opus-mt-de-en")  # a tiny stand-in for the downloaded model
    if uses_main_job(page):
        main_job, _ = request.getfixturevalue("main_job")
        (tmp_path / "runs").mkdir()
        (tmp_path / "runs" / "numbers_de_en").symlink_to(main_job / "runs" / "numbers_de_en")
    monkeypatch.chdir(tmp_path)
    return tmp_path


SERVED = {}  # SavedModel path -> the loaded model, as a server holds it


def newest_version(name):
    """The newest version of `saved_models/{name}`, loaded once, as TF Serving loads it."""
    base = os.path.join("saved_models", name)
    versions = [v for v in os.listdir(base) if v.isdigit()]
    path = os.path.abspath(os.path.join(base, max(versions, key=int)))
    if path not in SERVED:
        SERVED[path] = tf.saved_model.load(path)
    return SERVED[path]


def load_served_models():
    """Loads the newest version of every model under `saved_models/`, before requests come."""
    names = os.listdir("saved_models") if os.path.isdir("saved_models") else []
    for name in names:
        base = os.path.join("saved_models", name)
        if os.path.isdir(base) and any(v.isdigit() for v in os.listdir(base)):
            newest_version(name)


def predict(request):
    """TF Serving's Predict, answered from the newest version under `saved_models/`."""
    from tensorflow_serving.apis import predict_pb2

    loaded = newest_version(request.model_spec.name)
    signature = loaded.signatures[request.model_spec.signature_name or "serving_default"]
    inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
    response = predict_pb2.PredictResponse()
    for name, value in signature(**inputs).items():
        response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
    return response


def grpc_server():
    """A started gRPC server on `GRPC_ADDRESS` whose Predict is `predict`."""
    grpc = pytest.importorskip("grpc")
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    class Service(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            return predict(request)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Service(), server)
    try:
        server.add_insecure_port(GRPC_ADDRESS)
    except RuntimeError:
        pytest.skip(f"{GRPC_ADDRESS} is taken; the serving guide's gRPC call needs it")
    server.start()
    return server


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_examples_run(page, workspace):
    blocks = fenced_blocks(page, "python")
    server = grpc_server() if any(GRPC_ADDRESS in code for _, code in blocks) else None
    namespace = {"__name__": "__main__"}
    try:
        for line, code in blocks:
            if server is not None and GRPC_ADDRESS in code:
                load_served_models()  # a server loads its models before it answers requests
            exec(compile(code, f"{page}:{line}", "exec"), namespace)
    finally:
        if server is not None:
            server.stop(None)


def documented_commands(page):
    """`[(line, words)]` of each `keras-transformer` command in the page's shell blocks."""
    commands = []
    for line, code in fenced_blocks(page, "bash"):
        joined = re.sub(r"\\\n\s*", " ", code)  # continuation lines
        for text in joined.splitlines():
            text = re.sub(r"\s#\s.*$", "", text)  # a comment after the command
            for command in re.split(r"&&|\|", text):
                if "keras-transformer" not in command:
                    continue
                words = shlex.split(command.replace("<", " "))
                if words and os.path.basename(words[0]) == "keras-transformer":
                    commands.append((line, words[1:]))
    return commands


def subcommand_options():
    """`{command: {option strings}}` of the command line."""
    actions = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        name: {option for action in sub._actions for option in action.option_strings}
        for name, sub in actions[0].choices.items()
    }


def beam_options():
    """The names of Apache Beam's pipeline options (`--direct_num_workers`, `--project`,
    ...), which `translate-corpus` hands to Beam."""
    from apache_beam.options.pipeline_options import PipelineOptions

    return {f"--{name}" for name in PipelineOptions([]).get_all_options(drop_default=False)}


def test_documented_commands_and_options_exist():
    options = subcommand_options()
    options["translate-corpus"] |= beam_options()
    checked = 0
    for page in PAGES:
        for line, words in documented_commands(page):
            words = [w for w in words if w != "--verbose"]
            assert words[0] in options, f"{page}:{line}: no command {words[0]!r}"
            for word in words[1:]:
                flag = re.match(r"\[?(--[a-z0-9_-]+)", word)
                assert flag is None or flag.group(1) in options[words[0]], (
                    f"{page}:{line}: `{words[0]}` has no option {flag.group(1)}"
                )
            checked += 1
    assert checked >= 30, checked  # the README's, the CLI reference's and the guides'


def test_the_cli_reference_lists_every_option():
    with open(os.path.join(REPO, "docs", "cli.md"), encoding="utf-8") as f:
        reference = f.read().split("\n## Options\n")[1]
    sections = dict(re.findall(r"^### ([\w-]+)\n(.*?)(?=^### |\Z)", reference, re.S | re.M))
    for command, options in subcommand_options().items():
        assert command in sections, f"docs/cli.md has no section for `{command}`"
        listed = set(re.findall(r"`(--[a-z0-9-]+)", sections[command]))
        missing = options - listed - {"-h", "--help"}
        assert not missing, f"docs/cli.md, `{command}`: {sorted(missing)} not listed"


# Different measurements whose figures happen to share their digits.
COINCIDENT_FIGURES = {
    "0.68 s",
    "0.69x",
    "1.02x",
    "1.16x",
    "1.19x",
    "1.20x",
    "1.24x",
    "1.25x",
    "0.96x",
    "2.04x",
    "23.7 ms",
    "31.0 ms",
    "99.5%",
    "99.9%",
}


def test_each_measured_figure_is_stated_on_one_page():
    """A figure (a decimal with its unit) lives on one page; another page that needs it
    includes that page's table (a snippet) or links to it, so the two cannot disagree."""
    figure = re.compile(r"(?<![\w.])\d[\d,]*\.\d+(?:x| ms| s\b|%| GFLOP/s| MB| MiB)")
    pages_of = {}
    for page in PAGES:
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            for value in set(figure.findall(f.read())):
                pages_of.setdefault(value, []).append(page)
    repeated = {v: p for v, p in pages_of.items() if len(p) > 1 and v not in COINCIDENT_FIGURES}
    assert len(pages_of) > 100, len(pages_of)  # the pattern finds the documentation's figures
    assert repeated == {}


def test_the_readmes_links_reach_files_and_survive_a_package_index():
    """The README is the package's description on an index, where relative links
    break: it links the repository's files by their address under `repo_url`."""
    with open(os.path.join(REPO, "mkdocs.yml"), encoding="utf-8") as f:
        files = re.search(r"^repo_url: (\S+)", f.read(), re.M).group(1) + "/blob/main/"
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        links = re.findall(r"\]\(([^)#\s]+)", f.read())
    assert [link for link in links if "://" not in link] == []
    ours = [link.removeprefix(files) for link in links if link.startswith(files)]
    assert len(ours) >= 10, links
    for path in ours:
        assert os.path.exists(os.path.join(REPO, path)), f"README.md links to missing {path}"
    with open(os.path.join(REPO, "setup.cfg"), encoding="utf-8") as f:
        assert files.removesuffix("/blob/main/") in f.read()


def test_the_site_states_the_version_and_releases_it_was_tested_with():
    import keras_transformer as kt

    with open(os.path.join(REPO, "docs", "index.md"), encoding="utf-8") as f:
        index = f.read()
    with open(os.path.join(REPO, "setup.cfg"), encoding="utf-8") as f:
        pins = dict(
            re.findall(r"^\s+(tensorflow|keras|tensorflow-text)~=(\d+\.\d+)", f.read(), re.M)
        )
    assert f"keras_transformer {kt.__version__}," in index
    names = {"tensorflow": "TensorFlow", "keras": "Keras", "tensorflow-text": "TensorFlow Text"}
    for package, release in pins.items():
        assert f"{names[package]} {release}" in index, (package, release)
    assert len(pins) == 3, pins


API_PAGES = {
    "keras_transformer": "api/index.html",
    **{
        f"keras_transformer.{name}": f"api/{name}/index.html"
        for name in [
            "layers",
            "models",
            "text",
            "datasets",
            "training",
            "inference",
            "export",
            "importers",
            "run",
            "beam",
        ]
    },
}


def test_the_site_builds_strictly_with_every_public_name(tmp_path):
    pytest.importorskip("mkdocs")
    import importlib

    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    built = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    for module, page in API_PAGES.items():
        with open(tmp_path / page, encoding="utf-8") as f:
            anchors = set(re.findall(r'id="([^"]+)"', f.read()))
        names = importlib.import_module(module).__all__
        subpackages = set(API_PAGES) - {module}
        # A name that is also its module's (`inference.beam_search`) is documented by its
        # full path (`inference.beam_search.beam_search`).
        missing = [
            name
            for name in names
            if f"{module}.{name}" not in anchors | subpackages
            and f"{module}.{name}.{name}" not in anchors
        ]
        assert not missing, f"{page} lacks {missing}"


PUNCTUATION = " \n.,:;'\"()"


def message_patterns():
    """Every string of the package's code with at least 15 characters of its own text,
    as a pair of regular expressions: the whole string, whose replacement fields (of an
    f-string) match any text, and the string up to its last replacement field."""
    patterns = []
    for path in (pathlib.Path(REPO) / "keras_transformer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                parts = [v.value if isinstance(v, ast.Constant) else None for v in node.values]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts = [node.value]
            else:
                continue
            if parts[0] is not None:
                parts[0] = parts[0].lstrip(PUNCTUATION)
            if sum(len(part) for part in parts if part is not None) < 15:
                continue
            regex = ["(.+)" if part is None else re.escape(part) for part in parts]
            head = regex[:-1] if parts[-1] is None else regex
            patterns.append((re.compile("".join(regex)), re.compile("".join(head))))
    return patterns


def written_by_the_package(message, patterns):
    """Whether `message` (`…` where it names the user's values) is the package's strings
    one after the other, their replacement fields filled in."""
    message = message.lstrip(PUNCTUATION + "…")
    if not message:
        return True
    for whole, head in patterns:
        if whole.fullmatch(message):
            return True
        found = head.match(message)
        if found and written_by_the_package(message[found.end() :], patterns):
            return True
    return False


def test_the_troubleshooting_pages_messages_are_the_packages():
    patterns = message_patterns()
    page = "docs/guides/troubleshooting.md"
    messages = [
        line
        for _, code in fenced_blocks(page, "text")
        for line in code.splitlines()
        if line.strip()
    ]
    assert len(messages) >= 15, messages
    for message in messages:
        bare = re.sub(r"^error: ", "", message)
        assert written_by_the_package(message, patterns) or written_by_the_package(
            bare, patterns
        ), f"{page}: the package writes no such message: {message}"
