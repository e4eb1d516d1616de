"""A pre-warmed Python process that forks one child per start-up a test wants to see, instead of a fresh
`python -c ...` each time.

Why: a production start-up (`django.setup()` on config.settings.production) spends most of its ~2 s importing
third-party libraries (openai's types, scipy through bm25s, celery, Django itself), and
tests/platform/test_settings_errors.py starts dozens of them, one per refused or accepted environment.
The zygote imports those libraries once, in a clean process, and forks a child per case; the child takes the
case's environment, working folder and argv, runs the same code as `__main__` and exits the way the
interpreter would (SystemExit's code, 1 with the traceback on stderr for an exception, atexit handlers run,
streams flushed; `_exit`).
Everything the test can see is the same as a fresh start-up's: the exit code, stdout and stderr (the
equivalence is checked against real fresh start-ups in that file).

What keeps it honest:
- Only libraries are imported ahead, never project code or Django's settings: the zygote runs without
  DJANGO_SETTINGS_MODULE, so an import that touched settings would fail there, and every project module,
  the settings and `django.setup()` run in the child with the case's environment.
- While those libraries import, every read of `os.environ` is recorded. A case whose environment differs
  from the zygote's in a variable read then (OPENAI_LOG, PATH, ...) is refused with ValueError, as is one
  that changes a variable the interpreter reads as it starts (PYTHON*, LANG, LC_*) or removes one the zygote
  has. A library that reads the whole environment at import makes the zygote refuse every case, except the
  scans listed in `_KNOWN_SCANS` (tqdm reads only TQDM_* variables).
- The child skips the interpreter's teardown of its modules (~1 s for the hundreds imported ahead, each
  object touched and its page copied): only an object's __del__ run at that teardown could show anything.
- Variables read by C code at load (OpenBLAS's thread count) are not seen by the audit: the zygote's
  environment is the cases' common part (PATH, PYTHONPATH), so the libraries saw what a fresh process of
  any case would see unless a case sets such a variable, which none does.

    done = start_up([sys.executable, "-c", code, "arg"], env=..., cwd=repo, timeout=120)
    done.returncode, done.stdout, done.stderr   # as subprocess.run(..., capture_output=True, text=True)

`start_up` keeps one zygote per common environment and folder for the rest of the test run (each xdist
process has its own); `Zygote(imports, env=..., cwd=...)` is one of them.
"""

from __future__ import annotations

import atexit
import importlib
import json
import locale
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

# The libraries a production start-up of this project imports that cost the most (python -X importtime),
# none of which reads a project setting or the environment beyond what the audit allows. Not
# prometheus_client: it imports wsgiref.handlers, which copies the whole environment at import.
STARTUP_IMPORTS = (
    "openai",
    "numpy",
    "scipy.sparse",
    "bm25s",
    "celery",
    "celery.app",
    "kombu",
    "httpx",
    "pydantic",
    "rapidfuzz",
    "yaml",
    "django.urls",
    "django.http",
    "django.db.models",
    "django.forms",
    "django.template",
    "django.views.generic",
    "django.core.serializers",
    "django.utils.log",
    "rest_framework",
    # A request's first imports (the URL configuration): the statistics and exports.
    "scipy.stats",
    "pandas",
    "psycopg",
    "jinja2",
    "requests",
)

# Modules known to read the whole environment at import, and the prefix of the only variables they use.
_KNOWN_SCANS = {"tqdm.utils": "TQDM_"}
# Read by the interpreter itself as it starts, before any audit could see it.
_INTERPRETER_PREFIXES = ("PYTHON", "LC_", "LANG")


class Zygote:
    def __init__(self, imports: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self.env = dict(env)
        self.cwd = Path(cwd)
        self._folder = tempfile.TemporaryDirectory(prefix="zygote-")
        self._log = Path(self._folder.name) / "zygote.log"
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _LAUNCH, __file__, *imports],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        ready = self._reply(timeout=300)
        if "error" in ready:
            self.close()
            raise RuntimeError(f"the zygote could not import {list(imports)}:\n{ready['error']}")
        self.read: dict[str, str] = ready["read"]  # variable -> the module that read it
        self.scans: list[str] = ready["scans"]  # modules that read the whole environment
        unknown = [module for module in self.scans if module not in _KNOWN_SCANS]
        if unknown:
            self.close()
            raise RuntimeError(f"{unknown} read the whole environment at import: no case can be forked after it")

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._folder.cleanup()

    def differences(self, env: Mapping[str, str]) -> list[str]:
        """Why a case with this environment would not see what a fresh start-up sees (empty: it would)."""
        why = []
        for name in sorted(set(env) | set(self.env)):
            if env.get(name) == self.env.get(name):
                continue
            if name not in env:
                why.append(f"{name} is in the zygote's environment, not the case's")
            elif name.startswith(_INTERPRETER_PREFIXES):
                why.append(f"{name} is read by the interpreter as it starts")
            elif name in self.read:
                why.append(f"{name} was read when {self.read[name]} was imported")
            elif any(name.startswith(_KNOWN_SCANS[module]) for module in self.scans):
                why.append(f"{name} was read when {self.scans} were imported")
        return why

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """What `subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)` returns,
        for argv `[sys.executable, "-c", code, *args]`, `[sys.executable, script, *args]`, or `[script, *args]`
        where the script's #! line names this interpreter (a console script such as gunicorn's)."""
        why = self.differences(env)
        if why:
            raise ValueError(f"this case cannot be forked from the zygote: {'; '.join(why)}")
        argv = [str(part) for part in argv]
        if not _same_interpreter(argv[0]):
            argv = [sys.executable, *argv] if _shebang_is_this_interpreter(argv[0]) else argv
        if not _same_interpreter(argv[0]) or len(argv) < 2:
            raise ValueError(f"not a start-up of this interpreter: {argv}")
        out, err = (Path(self._folder.name) / name for name in ("stdout", "stderr"))
        request = {"argv": argv[1:], "env": dict(env), "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()
        pid = self._reply(timeout=30)["pid"]
        try:
            status = self._reply(timeout=timeout)["returncode"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._reply(timeout=30)
            raise subprocess.TimeoutExpired(argv, timeout, _read(out), _read(err)) from None
        return subprocess.CompletedProcess(argv, status, _read(out), _read(err))

    def _reply(self, *, timeout: float) -> dict[str, Any]:
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"the zygote did not answer within {timeout:.0f} s")
            chunk = os.read(fd, 1)
            if not chunk:
                raise RuntimeError(f"the zygote exited: {self._log.read_text()[-2000:]}")
            line += chunk
        return dict(json.loads(line))


_zygotes: dict[tuple[object, ...], Zygote] = {}


def start_up(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)` for a start-up
    of this interpreter, forked from a zygote with STARTUP_IMPORTS and the part of `env` that the interpreter
    and those imports read (ValueError if the case changes anything else they read)."""
    common = {name: value for name, value in env.items() if name == "PATH" or name.startswith(_INTERPRETER_PREFIXES)}
    key = (tuple(sorted(common.items())), str(cwd))
    if key not in _zygotes:
        if not _zygotes:
            atexit.register(_close_all)
        _zygotes[key] = Zygote(STARTUP_IMPORTS, env=common, cwd=cwd)
    return _zygotes[key].run(argv, env=env, cwd=cwd, timeout=timeout)


def _close_all() -> None:
    while _zygotes:
        _zygotes.popitem()[1].close()


def _read(path: Path) -> str:
    # As subprocess.run(text=True) decodes: the locale's encoding, universal newlines.
    return path.read_text(encoding=locale.getpreferredencoding(False)) if path.exists() else ""


def _same_interpreter(path: str) -> bool:
    # The same file in the same folder: a virtual environment's python is a link to the base interpreter, and
    # is that environment's because of the folder it is called by.
    same_folder = os.path.realpath(os.path.dirname(path)) == os.path.realpath(os.path.dirname(sys.executable))
    return same_folder and os.path.realpath(path) == os.path.realpath(sys.executable)


def _shebang_is_this_interpreter(path: str) -> bool:
    try:
        with open(path, "rb") as script:
            first = script.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and _same_interpreter(first[2:].decode().strip())


# The zygote's own `-c`: this file run under another name, so that `__main__` stays free for the cases.
_LAUNCH = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__zygote__')"


def _import_auditing_the_environment(imports: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    read: dict[str, str] = {}
    scans: list[str] = []
    environ_class = type(os.environ)
    getitem, iterate = environ_class.__getitem__, environ_class.__iter__

    def caller() -> str:
        frame = sys._getframe(2)
        while frame.f_globals.get("__name__") in ("os", "_collections_abc", "collections.abc"):
            frame = frame.f_back  # type: ignore[assignment]
        return str(frame.f_globals.get("__name__"))

    def audited_getitem(self: Any, key: str) -> str:
        module = caller()
        if module not in scans:
            read.setdefault(key, module)
        return str(getitem(self, key))

    def audited_iter(self: Any) -> Any:
        scans.append(caller())
        return iterate(self)

    environ_class.__getitem__ = audited_getitem  # type: ignore[method-assign]
    environ_class.__iter__ = audited_iter  # type: ignore[method-assign]
    try:
        for name in imports:
            importlib.import_module(name)
    finally:
        environ_class.__getitem__ = getitem  # type: ignore[method-assign]
        environ_class.__iter__ = iterate  # type: ignore[method-assign]
    return read, scans


def _send(message: dict[str, Any]) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")


def _serve() -> None:
    try:
        read, scans = _import_auditing_the_environment(sys.argv[2:])
    except BaseException:
        _send({"error": traceback.format_exc()})
        return
    _send({"read": read, "scans": scans})
    requests = os.fdopen(0, "rb", buffering=0)
    while line := requests.readline():
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become(request)  # never returns: the case's code runs and the child exits
        _send({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send({"returncode": os.waitstatus_to_exitcode(status)})


def _become(request: dict[str, Any]) -> None:
    """In the forked child: the case's descriptors, environment, folder, argv and `__main__`, then its code."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.close(null)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    args = request["argv"]
    main = sys.modules["__main__"]
    fresh = {"__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None}
    fresh["__builtins__"] = main.__dict__["__builtins__"]
    if args[0] == "-c":
        source, filename = args[1], "<string>"
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
        fresh["__loader__"] = main.__dict__.get("__loader__")
    else:
        filename = args[0]
        source = Path(filename).read_text()
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.realpath(filename))
        fresh.update(__file__=filename, __cached__=None)
    main.__dict__.clear()
    main.__dict__.update(fresh)
    status = 0
    try:
        code = compile(source, filename, "exec")
        exec(code, main.__dict__)  # noqa: S102 - the case's own start-up code, as `python -c` runs it
    except SystemExit as exit:
        status = _exit_status(exit.code)
    except BaseException as error:  # as the interpreter reports an uncaught exception, without this frame
        trace = _without_this_frame(error.__traceback__)
        sys.excepthook(type(error), error.with_traceback(trace), trace)
        status = 1
    _exit(status)


def _exit_status(code: object) -> int:
    """SystemExit's code as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _exit(status: int) -> None:
    """What the interpreter does at exit that a test could see, in its order (Py_FinalizeEx): wait for the
    threads that are not daemons, run the atexit handlers (logging's flush among them), flush stdout and
    stderr. Then out at once, without tearing the modules down (the module docstring says why)."""
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)


def _without_this_frame(trace: TracebackType | None) -> TracebackType | None:
    return trace.tb_next if trace is not None and trace.tb_frame.f_code is _become.__code__ else trace


if __name__ == "__zygote__":
    _serve()
