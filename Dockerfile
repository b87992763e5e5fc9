# syntax=docker/dockerfile:1
# Build stage: compile TypeScript with the pinned dev tool chain.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY agent ./agent
COPY scripts ./scripts
RUN npm run build

# Production dependencies only, resolved from the same lock file.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# Runtime: no shell scripts run, no package manager needed, a non-root user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY scripts/member-join.sh scripts/member-leave.sh /scripts/
RUN ln -s /app/dist/agent/main.js /usr/local/bin/etcd-lifecycle-agent && chmod 0755 /app/dist/agent/main.js
# 65532 is the conventional "nonroot" uid; kube-inject sets runAsUser to the same.
USER 65532:65532
EXPOSE 3501
# node is PID 1 and handles SIGTERM/SIGINT itself (clean shutdown within 5 s), so no init shim is needed.
HEALTHCHECK --interval=10s --timeout=2s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+((process.env.ETCD_AGENT_LISTEN||'').split(':').pop()||3501)+'/livez').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["etcd-lifecycle-agent"]
CMD ["serve"]
