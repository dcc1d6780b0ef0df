# syntax=docker/dockerfile:1
# The operator image: `kafka-rebalance` is the entrypoint, `operator` the default subcommand
# (the same image runs `kafka-rebalance sidecar` in consumer pods).
#
# Stage 1 builds the project's wheel and installs it with its runtime dependencies into a venv;
# stage 2 copies only that venv onto a clean slim Python, so no compiler, pip cache or source
# tree reaches the final image. The final image runs as a fixed non-root uid and writes nothing
# outside /tmp, so it works with readOnlyRootFilesystem (mount an emptyDir at /tmp).
#
# It installs the base distribution plus the `operator` and `librdkafka` extras only: no dev,
# pipeline or watch dependencies (no Spark, pandas; cryptography only for the operator's webhook
# certificate). The sidecar needs only the
# base; `librdkafka` (confluent-kafka) is its faster assign-mode engine (`--engine librdkafka`).
# The Kubernetes client's asyncio twin (kubernetes.aio, about 68 MB with its bytecode) is removed:
# nothing here imports it (kopf talks to the API through aiohttp itself). So is the `pipeline`
# subcommand's module. The development harness (`dev`, `demo`) is a distribution of its own
# (devharness/) that is neither copied nor installed here; a check below fails the build if a
# module of it is importable. In the image these subcommands answer with a one-line hint. (`-I`:
# the checks import the virtualenv's copy, not the source tree in the working directory.)
#
# The base is pinned by digest (python 3.11.13 slim on Debian bookworm), so a rebuild gets the
# same base until someone moves the pin. Without a registry (the project's CI machines),
# `kafka-rebalance dev image` passes a base made from Debian's packages instead; see
# docs/development.md. Labels: pass --build-arg REVISION=$(git rev-parse HEAD) and
# --build-arg SOURCE_URL=<where the repository lives>.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY assignors/ assignors/
COPY common/ common/
COPY kafka_rebalance/ kafka_rebalance/
COPY operator/ operator/
COPY sidecar/ sidecar/
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/kafka-rebalance \
 && /opt/kafka-rebalance/bin/pip install "$(ls /wheels/*.whl)[operator,librdkafka]" \
 && /opt/kafka-rebalance/bin/python -I -c "import kafka_rebalance_assignors, kafka_rebalance, kafka_rebalance_operator, kafka_rebalance_sidecar.consumer" \
 && /opt/kafka-rebalance/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && /opt/kafka-rebalance/bin/python -c "import kubernetes, pathlib, shutil; shutil.rmtree(pathlib.Path(kubernetes.__file__).parent / 'aio')" \
 && /opt/kafka-rebalance/bin/python -I -c "import kafka_rebalance, pathlib; (pathlib.Path(kafka_rebalance.__file__).parent / 'pipeline_command.py').unlink()" \
 && /opt/kafka-rebalance/bin/python -I -c "import importlib.util as u; found = [m for m in ('kafka_rebalance_dev', 'kafka_rebalance.devenv', 'kafka_rebalance.demo') if u.find_spec(m)]; assert not found, f'the image carries the dev harness: {found}'" \
 && /opt/kafka-rebalance/bin/kafka-rebalance dev 2>&1 | grep -q "not part of this installation"

FROM ${PYTHON_IMAGE}
ARG REVISION=unknown
ARG SOURCE_URL=unknown
LABEL org.opencontainers.image.title="kafka-rebalance-operator" \
      org.opencontainers.image.description="Lag-aware, weighted, sticky partition assignment for Kafka consumer groups on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}"
RUN groupadd --system --gid 10001 kafka-rebalance \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin kafka-rebalance
COPY --from=builder /opt/kafka-rebalance /opt/kafka-rebalance
# MALLOC_ARENA_MAX=2: glibc's malloc arenas capped from the first allocation (polls run in worker
# threads; with glibc's default each keeps a poll's freed arrays in an arena of its own). The
# operator caps them itself at start-up when this is unset, but later and so less completely:
# 26 MiB higher peak at 100,000 partitions (docs/install.md, Sizing). A pod's env overrides it.
ENV PATH=/opt/kafka-rebalance/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2 \
    HOME=/tmp
WORKDIR /tmp
# 8080: /healthz (liveness); 9100: /metrics (Prometheus).
EXPOSE 8080 9100
USER 10001:10001
ENTRYPOINT ["kafka-rebalance"]
CMD ["operator"]
