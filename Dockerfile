# syntax=docker/dockerfile:1
#
# One image for every agentmem binary. Containers pick theirs with `command`
# (docker-compose.yml, deploy/k8s); the default runs the all-in-one `agentmem up`.
# deploy/deploytest checks that every cmd/ directory is built here.

FROM golang:1.26 AS build
WORKDIR /src

# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY . .
# Pure Go throughout (modernc.org/sqlite included), so the binaries are static and run
# on any base image.
ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ \
        ./cmd/agentmem \
        ./cmd/ingest \
        ./cmd/extractor \
        ./cmd/consolidator \
        ./cmd/retriever

# Alpine rather than distroless: docker compose healthchecks need a client (busybox
# wget) inside the container to probe /healthz.
FROM alpine:3.22
RUN apk add --no-cache ca-certificates tzdata \
    && addgroup -S -g 10001 agentmem \
    && adduser -S -D -H -u 10001 -G agentmem -h /var/lib/agentmem agentmem \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/agentmem
COPY --from=build /out/ /usr/local/bin/

# A numeric user, so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
WORKDIR /var/lib/agentmem
# Local state of `agentmem up`; the distributed workers keep none (Qdrant, JetStream).
ENV AGENTMEM_DATA_DIR=/var/lib/agentmem
VOLUME ["/var/lib/agentmem"]
# http.listen: /metrics, /healthz, /readyz. The built-in default is loopback; in a
# container the port is only reachable where it is published.
ENV AGENTMEM_HTTP_LISTEN=:9090
EXPOSE 9090
CMD ["agentmem", "up"]
