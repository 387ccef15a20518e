# The Node 24 image for a host without a registry (deploy/images/build.ts): the Debian base made with
# debootstrap, plus the Node binary that runs the build (copied in from the build context) and npm from
# the npm registry. deploy/Dockerfile builds FROM it through its NODE_IMAGE build argument.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG NPM_VERSION
COPY node /usr/local/bin/node
# The certificate authorities the host trusts: this machine's network may re-sign TLS, and npm (here and in
# deploy/Dockerfile's npm ci) must trust what the host trusts.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
RUN set -eu; \
    mkdir -p /usr/local/lib/node_modules/npm; \
    node -e "fetch(process.argv[1]).then(async (r) => { if (!r.ok) throw new Error(r.url + ': ' + r.status); require('node:fs').writeFileSync('/tmp/npm.tgz', Buffer.from(await r.arrayBuffer())); })" \
      "https://registry.npmjs.org/npm/-/npm-${NPM_VERSION}.tgz"; \
    tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1; \
    rm /tmp/npm.tgz; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm; \
    node --version; npm --version
CMD ["node"]
