# syntax=docker/dockerfile:1
# venn: a static binary on distroless, running as an unprivileged user.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/venn ./cmd/venn

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/venn /venn
USER 65532:65532
# Read by the built-in default config and config.example.yaml: inside a
# container the listeners must not be bound to loopback.
ENV VENN_LISTEN=0.0.0.0:8545 VENN_METRICS_LISTEN=0.0.0.0:9545
# 8545: JSON-RPC (HTTP and WebSocket at /CHAIN); 9545: /metrics, /healthz, /readyz.
EXPOSE 8545 9545
ENTRYPOINT ["/venn", "serve"]
