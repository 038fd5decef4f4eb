"""The ``contrastext`` command and the shared argument handling of ``jobs/`` entry points."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from pydantic import BaseModel

# Nothing heavy at module level: ``contrastext --help`` loads no config model, pydantic or torch; a job's
# config and runner modules are imported when it runs.


@dataclass(frozen=True)
class Job:
    """A job of ``contrastext <name>`` and ``jobs/<name>.py``; both parts are imported only when it runs."""

    config: str  # "module:ConfigModel"
    runner: str  # "module:function", called with the validated config
    help: str


JOBS: dict[str, Job] = {
    "fit": Job("contrastext.config:FitJobConfig", "contrastext.pipelines.pair_fit:run_pair_fit",
               "contrastive fit of an encoder on (anchor, positive) pairs"),
    "build_corpus": Job("contrastext.pipelines.corpus:BuildCorpusConfig",
                        "contrastext.pipelines.corpus:run_build_corpus",
                        "Wikipedia dump → pages → category pairs (parquet)"),
    "encode_corpus": Job("contrastext.pipelines.corpus:EncodeCorpusConfig",
                         "contrastext.pipelines.corpus:run_encode_corpus",
                         "pages → sharded .h5 embeddings (resumable)"),
    "wcsbert_selftrain": Job("contrastext.methods.wcsbert.config:WCSBertConfig", "contrastext.pipelines.wcsbert:run_wcsbert",
                             "zero-shot classifier by WC-SBERT: category pretraining + self-training rounds"),
    "shuffle_divide": Job("contrastext.methods.shuffle_divide.config:ShuffleDivideConfig",
                          "contrastext.pipelines.shuffle_divide:run_shuffle_divide",
                          "unsupervised document encoder (Shuffle & Divide) + spherical k-means clustering"),
    "uctopic": Job("contrastext.methods.uctopic.config:UCTopicConfig", "contrastext.pipelines.uctopic:run_uctopic",
                   "UCTopic phrase encoder: pretrain / finetune (CCL) / mine topics / evaluate (set stage=...)"),
    "supcon_classify": Job("contrastext.methods.supcon.config:SupconClassifyConfig",
                           "contrastext.pipelines.supcon_classify:run_supcon_classify",
                           "classifier trained with focal loss + supervised NT-Xent"),
    "predict": Job("contrastext.predict.config:PredictConfig", "contrastext.pipelines.predict:run_predict",
                   "apply a trained model to every text of a folder or bucket (labels, clusters, topics, embeddings)"),
    "serve": Job("contrastext.serve.config:ServeConfig", "contrastext.serve.app:run_serve",
                 "HTTP endpoints (Ray Serve): embed, classify, cluster, and a web page"),
}


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", help="YAML file with the job's settings")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting, e.g. --set train.batch_size=64 (repeatable)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print everything Ray prints (its logs, the workers' output, progress bars); "
                             "by default they go to log files under the Ray session's logs folder")


def _import(target: str) -> Any:
    import importlib

    module, attribute = target.split(":")
    return getattr(importlib.import_module(module), attribute)


def run_job(name: str, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from contrastext.config import dump_config, load_config

    job = JOBS[name]
    model: type[BaseModel] = _import(job.config)
    try:
        config = load_config(model, args.config, args.overrides)
    except (ValidationError, ValueError, OSError) as error:
        print(f"contrastext {name}: invalid configuration:\n{error}", file=sys.stderr)
        return 2
    if args.print_config:
        print(dump_config(config), end="")
        return 0
    from contrastext.console import configure_console

    configure_console(verbose=getattr(args, "verbose", False))  # before the job's modules load
    runner: Callable[[Any], Any] = _import(job.runner)
    from contrastext.preflight import check_locations

    try:
        check_locations(config)
    except OSError as error:  # StorageError, FileNotFoundError: one line naming the location
        print(f"contrastext {name}: {error}", file=sys.stderr)
        return 2
    from contrastext.errors import InputError

    try:
        runner(config)
    except InputError as error:
        print(f"contrastext {name}: {error}", file=sys.stderr)
        return 2
    return 0


def job_main(name: str, argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jobs/<name>.py``: the same options as ``contrastext <name>``."""
    parser = argparse.ArgumentParser(prog=f"jobs/{name}", description=_describe(name))
    add_config_args(parser)
    return run_job(name, parser.parse_args(argv))


def _describe(name: str) -> str:
    return JOBS[name].help


def _cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np

    from contrastext.models import TextEncoder

    source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    with source:
        texts = [line.rstrip("\n") for line in source if line.strip()]
    encoder = TextEncoder.from_pretrained(args.model, max_length=args.max_length,
                                          allow_download=args.allow_download)
    embeddings = encoder.encode(texts, batch_size=args.batch_size, show_progress=True)
    np.save(args.output, embeddings)
    print(f"{len(texts)} texts → {args.output} ({embeddings.shape[0]}×{embeddings.shape[1]} float32)")
    return 0


def _cmd_resolve(args: argparse.Namespace) -> int:
    from contrastext.models import ModelNotFoundError, resolve_model_path

    try:
        print(resolve_model_path(args.model, allow_download=args.allow_download))
    except ModelNotFoundError as error:
        print(f"contrastext resolve: {error}", file=sys.stderr)
        return 1
    return 0


def _cmd_token(args: argparse.Namespace) -> int:
    from contrastext.serve.auth import AuthConfigError, new_token

    try:
        token, entry = new_token(args.name, args.scope)
    except AuthConfigError as error:
        print(f"contrastext token: {error}", file=sys.stderr)
        return 2
    print(f"token for {args.name} (shown once; the server keeps only its hash):\n{token}")
    print(f"entry for the server (CONTRASTEXT_API_TOKENS or auth.tokens_file, one per line):\n{entry}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contrastext", description="Contrastive text encoders on Ray.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in JOBS:
        job = sub.add_parser(name, help=_describe(name))
        add_config_args(job)
        job.set_defaults(handler=lambda a, n=name: run_job(n, a))

    embed = sub.add_parser("embed", help="encode one text per line to a .npy file")
    embed.add_argument("input", help="text file, one text per line ('-' for stdin)")
    embed.add_argument("output", help="where to write the .npy array")
    embed.add_argument("--model", default="bundled:minilm")
    embed.add_argument("--batch-size", type=int, default=64)
    embed.add_argument("--max-length", type=int, default=None)
    embed.add_argument("--allow-download", action="store_true", help="let the Hugging Face hub be contacted")
    embed.set_defaults(handler=_cmd_embed)

    resolve = sub.add_parser("resolve", help="print the local folder a model spec resolves to")
    resolve.add_argument("model")
    resolve.add_argument("--allow-download", action="store_true")
    resolve.set_defaults(handler=_cmd_resolve)

    token = sub.add_parser("token", help="make an API token for `serve` and the entry the server accepts it by")
    token.add_argument("--name", required=True, help="who holds it (logs and audit lines show this name)")
    token.add_argument("--scope", required=True, choices=["read", "train", "admin"],
                       help="read: inference and reading classifiers; train: also create; admin: also delete")
    token.set_defaults(handler=_cmd_token)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in JOBS:  # a job sets up its console itself (contrastext.console)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
