"""A pre-warmed Python process that forks one child per start-up a test wants to see, instead of a fresh
`python ...` each time.

Why: a production start-up (`django.setup()` on config.settings.production) spends most of its ~2 s importing
third-party libraries (openai's types, scipy through bm25s, celery, pandas, Django itself), and a Celery
worker ~3 s of its ~4 s of CPU. tests/platform/test_settings_errors.py starts dozens of the first, one per
refused or accepted environment, and the real-worker tests (tests/integration, tests/faults) start a hundred
or so of the second. The zygote imports those libraries once, in a clean process, and forks a child per
case; the child takes the case's environment, working folder, argv and output files, runs the same code as
`__main__` and exits the way the interpreter would (SystemExit's code, 1 with the traceback on stderr for an
exception, atexit handlers run, streams flushed; `_exit`). What a test can see is the same as from a fresh
start-up: the exit code, stdout and stderr, the process and its session (test_settings_errors.py compares
both, byte for byte).

What keeps it honest:
- Only libraries are imported ahead, never project code or Django's settings: the zygote runs without
  DJANGO_SETTINGS_MODULE, so an import that touched settings would fail there, and every project module,
  the settings, `django.setup()` and Celery's worker start-up run in the child with the case's environment.
- While those libraries import, every read of `os.environ` is recorded. A case whose environment differs
  from the zygote's in a variable read then (OPENAI_LOG, HOME, ...) is refused with ValueError, as is one
  that changes a variable the interpreter or a C library reads as it starts (PYTHON*, LANG, LC_*, TZ,
  OMP_*, OPENBLAS_*, ...; the audit cannot see those). A library that reads the whole environment at import
  makes the zygote refuse every case, except the scans listed in `_KNOWN_SCANS` (tqdm reads TQDM_* only).
  `start_up` and `spawn` start another zygote, on the case's environment, for a case no running one fits.
- The child skips the interpreter's teardown of its modules (~1 s for the hundreds imported ahead, each
  object touched and its page copied): only an object's __del__ run at that teardown could show anything.
- The child's parent is the zygote, not the test: `spawn` hands back a `Forked`, which answers poll, wait
  and the signals as `subprocess.Popen` does.

    done = start_up([sys.executable, "-c", code, "arg"], env=..., cwd=repo, timeout=120)
    done.returncode, done.stdout, done.stderr   # as subprocess.run(..., capture_output=True, text=True)
    worker = spawn([celery, "-A", "config", "worker", ...], env=..., cwd=repo, output=log_path)
    worker.pid, worker.poll(), worker.wait(timeout=5)   # as subprocess.Popen(..., start_new_session=True)

The zygotes last for the rest of the test run (each xdist process has its own). TEST_ZYGOTE=off runs every
case as a fresh process instead, to compare a whole run both ways.
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
import threading
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
    # A Celery worker's: its command line, the prefork pool, the brokers' transports, the model-server client.
    "celery.bin.celery",
    "celery.apps.worker",
    "celery.worker.consumer",
    "billiard.pool",
    "kombu.transport.redis",
    "kombu.transport.pyamqp",
    "psycopg_pool",
    "httpx2",
)

# Modules known to read the whole environment at import, and the prefix of the only variables they use.
_KNOWN_SCANS = {"tqdm.utils": "TQDM_"}
# Read by the interpreter itself as it starts, or by C libraries as they load (OpenBLAS's and OpenMP's thread
# counts, glibc's time zone and allocator), where the audit cannot see it.
_READ_AT_START = ("PYTHON", "LC_", "LANG", "TZ", "OMP_", "OPENBLAS_", "MKL_", "GOTO_", "BLIS_", "MALLOC_")


class Zygote:
    def __init__(self, imports: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self.env = dict(env)
        self.cwd = Path(cwd)
        self._lock = threading.Lock()
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
        """Why a case with this environment would not see what a fresh start-up sees (empty: it would). Only the
        variables read before the fork must match: the child's environment is the case's, whole."""
        why = []
        for name in sorted(set(env) | set(self.env)):
            if env.get(name) == self.env.get(name):
                continue
            if name.startswith(_READ_AT_START):
                why.append(f"{name} is read as the interpreter or a C library starts")
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
        argv = self._argv(argv, env)
        out, err = (Path(self._folder.name) / name for name in ("stdout", "stderr"))
        request = {"op": "run", "argv": argv[1:], "env": dict(env), "cwd": str(cwd), "stdout": str(out)}
        with self._lock:
            pid = self._ask(request | {"stderr": str(err)})["pid"]
            try:
                status = self._reply(timeout=timeout)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._reply(timeout=30)
                raise subprocess.TimeoutExpired(argv, timeout, _read(out), _read(err)) from None
        return subprocess.CompletedProcess(argv, status, _read(out), _read(err))

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, output: Path) -> Forked:
        """As `subprocess.Popen(argv, env=env, cwd=cwd, stdout=<output opened "wb">, stderr=STDOUT,
        start_new_session=True)`: a long-running process (a Celery worker) in a session of its own."""
        argv = self._argv(argv, env)
        request = {"op": "spawn", "argv": argv[1:], "env": dict(env), "cwd": str(cwd), "stdout": str(output)}
        with self._lock:
            return Forked(self, self._ask(request | {"stderr": str(output)})["pid"], argv)

    def poll(self, pid: int) -> int | None:
        """A spawned child's exit status (negative: the signal that ended it), None while it runs."""
        with self._lock:
            return self._ask({"op": "poll", "pid": pid})["returncode"]  # type: ignore[no-any-return]

    def _argv(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        why = self.differences(env)
        if why:
            raise ValueError(f"this case cannot be forked from the zygote: {'; '.join(why)}")
        argv = [str(part) for part in argv]
        if not _same_interpreter(argv[0]):
            argv = [sys.executable, *argv] if _shebang_is_this_interpreter(argv[0]) else argv
        if not _same_interpreter(argv[0]) or len(argv) < 2:
            raise ValueError(f"not a start-up of this interpreter: {argv}")
        return argv

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()
        return self._reply(timeout=30)

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


class Forked:
    """A spawned child, as much of `subprocess.Popen` as the tests use: pid, returncode, poll, wait,
    send_signal, terminate, kill."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.poll(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never a signal to a pid that may have been reused
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_zygotes: list[Zygote] = []


def zygote_for(env: Mapping[str, str], cwd: Path) -> Zygote:
    """A zygote in `cwd` whose pre-imports saw what this environment would have shown them: one of those
    already running, or a new one on this environment (without DJANGO_SETTINGS_MODULE, so that an import
    that touched settings would fail)."""
    for zygote in _zygotes:
        if zygote.cwd == Path(cwd) and not zygote.differences(env):
            return zygote
    if not _zygotes:
        atexit.register(_close_all)
    own = {name: value for name, value in env.items() if name != "DJANGO_SETTINGS_MODULE"}
    _zygotes.append(Zygote(STARTUP_IMPORTS, env=own, cwd=cwd))
    return _zygotes[-1]


def start_up(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)` for a start-up
    of this interpreter, forked from a zygote with STARTUP_IMPORTS (ValueError if the case changes anything
    they read)."""
    if os.environ.get("TEST_ZYGOTE") == "off":
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return zygote_for(env, cwd).run(argv, env=env, cwd=cwd, timeout=timeout)


def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, output: Path) -> Forked | subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, env=env, cwd=cwd, stdout=output, stderr=STDOUT, start_new_session=True)` for
    a long-running process of this interpreter, forked from a zygote with STARTUP_IMPORTS."""
    if os.environ.get("TEST_ZYGOTE") == "off":
        with output.open("wb") as log:
            return subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
    return zygote_for(env, cwd).spawn(argv, env=env, cwd=cwd, output=output)


def _close_all() -> None:
    while _zygotes:
        _zygotes.pop().close()


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
    ended: dict[int, int] = {}
    while line := requests.readline():
        request = json.loads(line)
        if request["op"] == "poll":
            pid = request["pid"]
            if pid not in ended:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    ended[pid] = os.waitstatus_to_exitcode(status)
            _send({"returncode": ended.get(pid)})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become(request)  # never returns: the case's code runs and the child exits
        _send({"pid": pid})
        if request["op"] == "run":
            _, status = os.waitpid(pid, 0)
            _send({"returncode": os.waitstatus_to_exitcode(status)})


def _become(request: dict[str, Any]) -> None:
    """In the forked child: the case's descriptors, environment, folder, argv and `__main__`, then its code."""
    if request["op"] == "spawn":
        os.setsid()  # start_new_session=True: the test ends it, and what it forks, with os.killpg
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    if request["stderr"] == request["stdout"]:
        os.dup2(out, 2)  # stderr=subprocess.STDOUT
    else:
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(err, 2)
        os.close(err)
    os.close(out)
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
