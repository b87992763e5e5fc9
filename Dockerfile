# syntax=docker/dockerfile:1
# Build stage: compile TypeScript and bundle the agent (scripts/bundle.ts) with the pinned dev tool chain.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY agent ./agent
COPY scripts ./scripts
RUN npm run build

# Runtime: Node 24 LTS and the bundle alone (dist/bin, with etcd's .proto files in dist/proto): no
# node_modules, no shell scripts run, no package manager needed, a non-root user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/dist/bin ./dist/bin
COPY --from=build /src/dist/proto ./dist/proto
COPY scripts/member-join.sh scripts/member-leave.sh scripts/member-common.sh /scripts/
# etcd's snapshot restore tool, which a backup's verification and prepare's restore run (etcdutl on
# PATH unless ETCD_AGENT_ETCDUTL names another): the one of the etcd the kit runs, from its official
# image. It is a static binary, and restores snapshots of etcd 3.4 and later.
COPY --from=quay.io/coreos/etcd:v3.6.16 /usr/local/bin/etcdutl /usr/local/bin/etcdutl
# A static shell for etcd images that have none (official etcd images from 3.5.7 on): kube-inject's
# prepare init container copies /bin/busybox next to the flags file, and etcd's command runs it.
RUN apt-get update && apt-get install -y --no-install-recommends busybox-static && rm -rf /var/lib/apt/lists/*
# The bin's first line carries its Node flags (#!/usr/bin/env -S node …). One run fills Node's module
# compile cache beside it (dist/bin/.compile-cache), which a read-only root filesystem can still read.
# No package.json: etcd_agent_build_info's version is bundled into the bin (build-info.ts).
RUN ln -s /app/dist/bin/etcd-lifecycle-agent.js /usr/local/bin/etcd-lifecycle-agent \
  && etcd-lifecycle-agent help >/dev/null \
  && etcdutl version >/dev/null \
  && chmod -R a+rX /app/dist
# 65532 is the conventional "nonroot" uid; kube-inject sets runAsUser to the same.
USER 65532:65532
EXPOSE 3501
# node is PID 1 and handles SIGTERM/SIGINT itself (clean shutdown within 5 s), so no init shim is needed.
HEALTHCHECK --interval=10s --timeout=2s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+((process.env.ETCD_AGENT_LISTEN||'').split(':').pop()||3501)+'/livez').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["etcd-lifecycle-agent"]
CMD ["serve"]
