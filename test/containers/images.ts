// The images the suite runs, made without a registry by the product's own recipe (deploy/images/build.ts, what
// `make images` runs): a Debian root from debootstrap imported as the base image, and the images for Node,
// Postgres, Redis, Caddy and Prometheus built FROM it. Tagged `platform-test/…` with a hash of their recipe and
// kept between runs. The project's own image is built by compose, as the documentation says (build.ts), with
// NODE_IMAGE pointing at the Node image.
import {
  type BaseImages,
  type BuildReport,
  buildBaseImages,
  REPO_DIR,
  timed,
} from '../../deploy/images/build.ts';
import type { ContainerSuiteConfig } from './config.ts';

export type { BaseImages, BuildReport };
export { REPO_DIR, timed };

export interface StackImages extends BaseImages {
  platform: string;
}

/** Every base image the stack needs, each reused while its recipe is unchanged. */
export function buildImages(cfg: ContainerSuiteConfig): Promise<BuildReport> {
  return buildBaseImages({ docker: cfg.docker, caFile: cfg.caFile, prefix: 'platform-test' });
}
