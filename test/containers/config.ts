// The container suite's settings, read once from the environment (the only module of the suite that does).
import { existsSync } from 'node:fs';

export interface ContainerSuiteConfig {
  /**
   * The docker CLI. Debian's (/usr/bin/docker, from docker.io) is preferred: it builds with BuildKit without
   * the buildx plugin, which a newer CLI elsewhere on the PATH may lack.
   */
  docker: string;
  compose: string;
  /** Certificate authorities the host trusts, handed to the image builds (npm behind a re-signing network). */
  caFile: string | undefined;
  /** Where dockerd logs when the suite starts it. */
  dockerdLog: string;
  /** CONTAINER_SUITE_KEEP=1 leaves the stack up after the run (for looking around); default: torn down. */
  keepStack: boolean;
  /** CONTAINER_SUITE_COLD_START=shipped: time a first `up -d` with the shipped health checks (~90 s more). */
  shippedColdStart: boolean;
  /** Where Debian's Compose v2 plugin is unpacked when the docker CLI has none (compose-v2.ts). */
  composeV2Dir: string;
}

export function loadContainerSuiteConfig(env: NodeJS.ProcessEnv = process.env): ContainerSuiteConfig {
  const ca = env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt';
  return Object.freeze({
    docker: env.CONTAINER_SUITE_DOCKER ?? (existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker'),
    compose: env.CONTAINER_SUITE_COMPOSE ?? 'docker-compose',
    caFile: existsSync(ca) ? ca : undefined,
    dockerdLog: env.CONTAINER_SUITE_DOCKERD_LOG ?? '/var/log/platform-test-dockerd.log',
    keepStack: env.CONTAINER_SUITE_KEEP === '1',
    shippedColdStart: env.CONTAINER_SUITE_COLD_START === 'shipped',
    composeV2Dir: env.CONTAINER_SUITE_COMPOSE_V2_DIR ?? '/var/cache/platform-test/compose-v2',
  });
}
