# For a host without a registry (deploy/images/build.ts), in place of the official redis image: Debian's redis-server on the debootstrap base, data in
# /data, run in the foreground as the redis user. Like the official image, a server started without a config
# file gets --protected-mode no (it is reached from other containers; the network is the boundary).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && mkdir -p /data && chown redis:redis /data \
 && printf '#!/bin/sh\nif [ "$1" = redis-server ]; then shift; exec redis-server --protected-mode no "$@"; fi\nexec "$@"\n' \
      > /usr/local/bin/redis-entrypoint.sh && chmod +x /usr/local/bin/redis-entrypoint.sh
WORKDIR /data
USER redis
ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]
CMD ["redis-server"]
