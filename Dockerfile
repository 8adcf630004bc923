# syntax=docker/dockerfile:1
#
# The Overseer image: `docker build -t overseer:dev .` (deploy/ and e2e/kind.sh use that
# tag). Two stages: the builder makes a wheel and installs it with its dependencies,
# pinned by constraints.txt, into a virtualenv; the final image is the slim Python base
# plus that virtualenv only: no compiler, no pip, no source tree, non-root (65532).
#
# The venv lives at the same path in both stages (its scripts carry absolute shebangs)
# and both stages use the same base, so the venv's python symlink resolves.

ARG PYTHON_IMAGE=python:3.11-slim

# -- builder --------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

RUN python -m venv /opt/overseer

WORKDIR /src
# what the wheel is built from (.dockerignore admits nothing else)
COPY pyproject.toml constraints.txt README.md ./
COPY manager ./manager
COPY controllers ./controllers
COPY apiserver ./apiserver

# The wheel first (no dependencies), then install it with every dependency pinned by
# constraints.txt (all of them ship wheels: nothing is compiled). Then take
# the installers out of the venv: the final image copies it as is.
RUN /opt/overseer/bin/pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/overseer/bin/pip install --constraint constraints.txt \
        /wheels/kube_overseer-*.whl \
 && /opt/overseer/bin/overseer version \
 && /opt/overseer/bin/pip uninstall --yes pip setuptools wheel \
 && find /opt/overseer -name '__pycache__' -type d -prune -exec rm -rf {} +

# -- final ----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="overseer" \
      org.opencontainers.image.description="A Kubernetes controller manager in Python" \
      org.opencontainers.image.licenses="Apache-2.0"

# no .pyc writes (the root filesystem is read-only in the pod), unbuffered logs, the
# venv first on PATH; HOME has no kubeconfig, so the client uses the service account
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1 \
    VIRTUAL_ENV=/opt/overseer \
    PATH=/opt/overseer/bin:$PATH \
    HOME=/nonexistent

# the base image's own installers are build tools too
RUN python -m pip uninstall --yes --root-user-action=ignore pip setuptools wheel \
 && groupadd --system --gid 65532 overseer \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin overseer

COPY --from=builder /opt/overseer /opt/overseer

USER 65532:65532
WORKDIR /
# metrics, health probes, webhooks (config: metricsBindAddress, healthProbeBindAddress,
# webhooks.port)
EXPOSE 8080 8081 9443

ENTRYPOINT ["overseer"]
CMD ["run"]
