import type { Redis } from 'ioredis';
import { KEY_NOTICE_CHANNEL, parseKeyNotice } from '../../lib/key-notices.ts';
import type { Logger } from '../../lib/logger.ts';
import type { KeySet } from './key-set.ts';

/**
 * Listens on `platform:keys` (lib/key-notices.ts) for the platform issuer's key notices: a withdrawn kid is
 * refused at once and the key set fetched again from the issuer (KeySet.withdraw). Subscribed on every
 * (re)connection of the subscriber; a notice missed while disconnected is made up by the key set's max-age.
 */
export function listenForKeyNotices(sub: Redis, keySet: KeySet, log: Logger): () => void {
  const onMessage = (channel: string, message: string) => {
    if (channel !== KEY_NOTICE_CHANNEL) return;
    const notice = parseKeyNotice(message);
    if (!notice) {
      log.warn({ channel }, 'ignored a malformed key notice');
      return;
    }
    if (notice.issuer !== keySet.issuer) return;
    if (notice.withdrawn.length > 0)
      log.warn(
        { issuer: notice.issuer, withdrawn: notice.withdrawn, signing: notice.signing },
        'signing keys withdrawn',
      );
    void keySet.withdraw(notice.withdrawn, notice.signing);
  };
  const subscribe = () => {
    sub
      .subscribe(KEY_NOTICE_CHANNEL)
      .catch((err: Error) =>
        log.debug(
          { err: { message: err.message } },
          'key notice subscription failed; retried on reconnection',
        ),
      );
  };
  sub.on('message', onMessage);
  sub.on('ready', subscribe);
  if (sub.status === 'ready') subscribe();
  return () => {
    sub.off('message', onMessage);
    sub.off('ready', subscribe);
  };
}
