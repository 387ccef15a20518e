# For a host without a registry (deploy/images/build.ts), in place of the official caddy image: Debian's Caddy 2 on the debootstrap base, started like the
# official image (caddy run with /etc/caddy/Caddyfile), with wget for the compose health check.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends caddy wget >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && mkdir -p /data /config
ENV XDG_DATA_HOME=/data XDG_CONFIG_HOME=/config
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
