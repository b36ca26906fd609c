# syntax=docker/dockerfile:1
# The fleetgen image: the CLI, and the health reconciler the rendered Deployment runs
# (`fleetgen health run`). Build from the repository root:
#   docker build -t <registry>/fleetgen:<version> .   (.github/workflows/images.yml does, on each release tag)
# .ci/run lints this file with BuildKit's own checks (tests/upstream/dockerfile-lint).

FROM python:3.11.7-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY generator ./generator
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.7-slim-bookworm
# No bytecode written at run time (the root filesystem is read-only in the Deployment), no
# buffered logs (the audit lines must reach the log even if the process is killed).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-cache-dir --no-index --find-links /wheels fleetgen
# The Deployment's runAsUser: an unprivileged user with no login shell and no home to write.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["fleetgen"]
CMD ["--help"]
