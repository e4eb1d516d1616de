#!/bin/sh
# Celery worker: late acks, one task at a time per slot (a process, or a thread with CELERY_POOL=threads).
# CELERY_QUEUES (comma-separated) names the queues it consumes: unset, every queue (one worker does all);
# a deployment runs one worker per queue (docker-compose.yml: CELERY_QUEUES=annotator, =retrieval, =research).
# The periodic sweepers run from one beat process per deployment (platform/celery-beat.sh), never here.
set -e
# The same settings as every other process of the host: the variables of .env (ENV_FILE) that the environment
# does not set, read by the settings' own reader (config/environment.py), before anything below reads one.
cd "$(dirname "$0")/.."
eval "$("${PYTHON:-python}" -m config.environment)"
# Without spaces: Celery takes "research, default" as the queues "research" and " default" (a new, empty one).
queues=$(printf %s "${CELERY_QUEUES:-}" | tr -d '[:space:]')
if [ -n "$queues" ]; then
  set -- -Q "$queues"
fi
# WORKER_NICE lowers the worker's CPU priority (nice -n), and WORKER_SCHED=idle runs it under Linux's
# SCHED_IDLE policy (chrt --idle: CPU time only when nothing else wants it): the research worker's (nice 10),
# when it shares a host with the annotator worker, so CPU-bound scoring never slows an annotator's
# question, and the annotator worker's (nice 5), when it shares one with the web server, so generation never
# slows a page (docs/deploy.md).
# Any other WORKER_SCHED stops here: a misspelt one would otherwise run the worker at normal priority.
case "${WORKER_SCHED:-}" in
  "") run="" ;;
  idle) run="chrt --idle 0" ;;
  *)
    echo "celery-worker.sh: WORKER_SCHED must be idle or empty (unset), not '${WORKER_SCHED}'" >&2
    exit 2
    ;;
esac
if [ -n "${WORKER_NICE:-}" ]; then
  run="$run nice -n ${WORKER_NICE}"
fi
# CELERY_POOL: prefork (the default: a process per slot, for CPU-bound work such as scoring, reports and the
# offline summariser) or threads (one process, CELERY_CONCURRENCY threads: for the annotator worker, whose
# generations wait seconds on a model server and use a few milliseconds of CPU; docker-compose.yml). A threads
# worker's default concurrency follows the model server's: LLM_CONCURRENCY slots for the calls in flight, and 4
# more for the retrievals (where it serves the retrieval queue too) and for the summaries' own database work (the
# rule `worker slots >= model-server concurrency`, docs/deploy.md "Sizing").
pool="${CELERY_POOL:-prefork}"
case "$pool" in
  prefork) concurrency="${CELERY_CONCURRENCY:-4}" ;;
  threads)
    llm=$(printf %s "${LLM_CONCURRENCY:-4}" | tr -d '[:space:]')
    case "$llm" in
      '' | *[!0-9]*)
        echo "celery-worker.sh: LLM_CONCURRENCY must be a whole number, not '${LLM_CONCURRENCY}'" >&2
        exit 2
        ;;
    esac
    concurrency="${CELERY_CONCURRENCY:-$((llm + 4))}"
    ;;
  *)
    echo "celery-worker.sh: CELERY_POOL must be prefork or threads, not '${CELERY_POOL}'" >&2
    exit 2
    ;;
esac
# A prefork process runs one task at a time beside its lease heartbeat: two database connections from its pool.
# A threads worker's tasks give their connection back while they wait on the model server, and so do the
# heartbeats between beats (kernel.db.connection_release): 4 serve its threads. docs/deploy.md, "Database
# connections"; DATABASE_POOL_MAX_SIZE overrides either.
if [ "$pool" = threads ]; then
  export DATABASE_POOL_MAX_SIZE="${DATABASE_POOL_MAX_SIZE:-4}"
else
  export DATABASE_POOL_MAX_SIZE="${DATABASE_POOL_MAX_SIZE:-2}"
fi
# The pool processes count their metrics into files in one folder, which the worker's metrics server adds up
# (METRICS_PORT, config/monitoring.py): a fresh folder per start unless PROMETHEUS_MULTIPROC_DIR names one.
if [ -z "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
  PROMETHEUS_MULTIPROC_DIR=$(mktemp -d "${TMPDIR:-/tmp}/satisfy-worker-metrics-XXXXXX")
fi
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db
export PROMETHEUS_MULTIPROC_DIR
# shellcheck disable=SC2086  # $run is empty, "chrt --idle 0" and/or "nice -n N": split on purpose
exec $run celery -A config worker \
  --loglevel="${CELERY_LOGLEVEL:-INFO}" \
  --pool="$pool" \
  --concurrency="$concurrency" \
  --prefetch-multiplier=1 \
  "$@"
