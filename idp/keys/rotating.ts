import { createPrivateKey, generateKeyPair as generateKeyPairCb } from 'node:crypto';
import { promisify } from 'node:util';
import { ConfigError } from '../../lib/config.ts';
import { encodeKeyNotice, KEY_NOTICE_CHANNEL, parseKeyNotice } from '../../lib/key-notices.ts';
import { isCluster, type RedisClient } from '../../lib/redis/client.ts';
import { jwksKey } from '../../lib/revocation.ts';
import type { KeyRotationConfig } from '../config.ts';
import { createAdminAuditStore } from '../store/admin-audit.ts';
import { JwtSigner } from '../tokens/jwt.ts';
import { fromKeyObject, loadSigningKeys, type SigningKey } from '../tokens/keys.ts';
import { KeyDecryptionError, KeySealer, ScheduleMac } from './crypto.ts';
import {
  iso,
  jwksBody,
  type KeyActor,
  type KeyListing,
  type KeyRing,
  type KeyRingDeps,
  type RotationOutcome,
  SCHEDULE_ACTOR,
} from './ring.ts';
import { type Derived, deriveStates, jwksMaxAge, nextKeyDueAt, pollSeconds } from './schedule.ts';
import { createRotatingKeyStore, type KeyOrigin, type StoredKey, type TxKeys } from './store.ts';

// PLATFORM_KEY_ROTATION=auto: the provider's own keys, in Postgres (store.ts), their private parts sealed
// (crypto.ts), their states derived from timestamps (schedule.ts); one replica at a time changes them under the
// rotation lock, and every replica and gateway hears of a change through a notice.

const generateKeyPair = promisify(generateKeyPairCb);

export class RotatingKeyRing implements KeyRing {
  readonly rotation = true;
  readonly #deps: KeyRingDeps;
  readonly #conf: KeyRotationConfig;
  readonly #sealer: KeySealer;
  readonly #scheduleMac: ScheduleMac;
  /** Rows left out, by kid (an altered schedule, a private key that does not decrypt): logged once each. */
  readonly #distrusted = new Set<string>();
  readonly #undecryptable = new Set<string>();
  readonly #store: ReturnType<typeof createRotatingKeyStore>;
  #rows: StoredKey[] = [];
  /** Decrypted keys by kid (a kid's key never changes, so each is decrypted once). */
  readonly #keys = new Map<string, SigningKey>();
  readonly #signers = new Map<string, JwtSigner>();
  #derived: Derived | undefined;
  #signer: JwtSigner | undefined;
  #published: SigningKey[] = [];
  #jwks = { body: '{"keys":[]}', maxAge: 1 };
  #changesAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #subscriber: RedisClient | undefined;
  #ticking = false;

  private constructor(deps: KeyRingDeps, conf: KeyRotationConfig) {
    this.#deps = deps;
    this.#conf = conf;
    this.#sealer = new KeySealer(conf.encryptionKey);
    this.#scheduleMac = new ScheduleMac(conf.encryptionKey);
    this.#store = createRotatingKeyStore(deps.pool);
  }

  static async start(deps: KeyRingDeps, conf: KeyRotationConfig): Promise<RotatingKeyRing> {
    const ring = new RotatingKeyRing(deps, conf);
    await ring.#load().catch((err: Error) => {
      if (/rotating_keys" does not exist/.test(err.message))
        throw new Error('table platform.rotating_keys is missing: run platform migrate');
      throw err;
    });
    // The first replica to start creates (or imports) the first key; the others wait on the lock and read it.
    await ring.#transitions(true);
    await ring.#load();
    if (ring.#signer === undefined) throw new Error('no signing key is current after start-up');
    ring.#timer = setInterval(() => void ring.#tick(), pollSeconds(conf.publishAheadSeconds) * 1000);
    ring.#timer.unref();
    if (deps.redis) await ring.#subscribe(deps.redis);
    if (conf.publishAheadSeconds < 3600)
      deps.log.warn(
        { publishAheadSeconds: conf.publishAheadSeconds },
        'PLATFORM_KEY_PUBLISH_AHEAD is under an hour: a resource server that caches the key set for an hour whatever its max-age may meet a key before it knows it',
      );
    if (deps.config.privateKey !== undefined && ring.#rows.every((r) => r.origin !== 'imported'))
      deps.log.warn(
        {},
        'PLATFORM_OIDC_PRIVATE_KEY is ignored: PLATFORM_KEY_ROTATION=auto keeps the keys in Postgres (imported only into an empty table)',
      );
    return ring;
  }

  signer(): JwtSigner {
    if (Date.now() >= this.#changesAt) this.#recompute();
    return this.#signer!;
  }

  published(): readonly SigningKey[] {
    if (Date.now() >= this.#changesAt) this.#recompute();
    return this.#published;
  }

  jwks(): { body: string; maxAge: number } {
    if (Date.now() >= this.#changesAt) this.#recompute();
    return this.#jwks;
  }

  async listing(): Promise<KeyListing[]> {
    await this.#load();
    const d = this.#derived!;
    return this.#rows.map((r) => {
      const k = d.keys.get(r.kid)!;
      return {
        kid: r.kid,
        alg: 'RS256',
        state: k.state,
        signing: k.state === 'current',
        origin: r.origin,
        published_since: k.state === 'scheduled' ? null : iso(r.publishAt),
        // A withdrawn key signed if it activated before its withdrawal.
        activated_at:
          r.activateAt <= Date.now() && (r.withdrawnAt === undefined || r.activateAt < r.withdrawnAt)
            ? iso(r.activateAt)
            : null,
        retired_at: iso(k.retiredAt),
        unpublish_at: iso(k.unpublishAt),
        withdrawn_at: iso(r.withdrawnAt),
      };
    });
  }

  async rotate(emergency: boolean, actor: KeyActor): Promise<RotationOutcome> {
    const out = await this.#store.locked(true, async (tx) => {
      const now = Date.now();
      const rows = this.#trusted(tx.rows);
      const d = deriveStates(rows, now);
      if (!emergency) {
        const pending = rows.find((r) => {
          const s = d.keys.get(r.kid)?.state;
          return s === 'next' || s === 'scheduled';
        });
        if (pending) return outcome(pending.kid, false, false, pending.publishAt, pending.activateAt, []);
        const activateAt = now + this.#conf.publishAheadSeconds * 1000;
        const kid = await this.#create(tx, 'planned', now, activateAt, actor);
        return outcome(kid, true, false, now, activateAt, []);
      }
      const withdrawn = d.published;
      await tx.withdraw(
        rows
          .filter((r) => withdrawn.includes(r.kid))
          .map((r) => ({ kid: r.kid, scheduleMac: this.#scheduleMac.mac({ ...r, withdrawnAt: now }) })),
        now,
      );
      const audit = createAdminAuditStore(tx.client);
      for (const kid of withdrawn)
        await audit.record(
          keyEvent(actor, 'key-withdrawn', kid, { withdrawn_at: iso(now), emergency: true }),
        );
      const kid = await this.#create(tx, 'emergency', now, now, actor);
      return outcome(kid, true, true, now, now, withdrawn);
    });
    await this.#load();
    if (out!.created) await this.#notify(out!.withdrawn, out!.emergency ? out!.kid : undefined);
    return out!;
  }

  close(): void {
    clearInterval(this.#timer);
    this.#subscriber?.disconnect();
  }

  /** A new RSA key, sealed and stored; its creation (and, when it signs at once, activation) is audited. */
  async #create(tx: TxKeys, origin: KeyOrigin, publishAt: number, activateAt: number, actor: KeyActor) {
    const { privateKey } = await generateKeyPair('rsa', { modulusLength: 2048 });
    return this.#insert(tx, await fromKeyObject(privateKey, undefined), origin, publishAt, activateAt, actor);
  }

  async #insert(
    tx: TxKeys,
    key: SigningKey,
    origin: KeyOrigin,
    publishAt: number,
    activateAt: number,
    actor: KeyActor,
  ): Promise<string> {
    const der = key.privateKey.export({ format: 'der', type: 'pkcs8' });
    await tx.insert({
      kid: key.kid,
      publicJwk: key.publicJwk,
      sealed: this.#sealer.seal(key.kid, der),
      origin,
      publishAt,
      activateAt,
      scheduleMac: this.#scheduleMac.mac({ kid: key.kid, publishAt, activateAt, withdrawnAt: undefined }),
    });
    const audit = createAdminAuditStore(tx.client);
    await audit.record(
      keyEvent(actor, 'key-created', key.kid, {
        origin,
        publish_at: iso(publishAt),
        activate_at: iso(activateAt),
      }),
    );
    if (activateAt <= Date.now()) {
      await audit.record(keyEvent(actor, 'key-activated', key.kid, { activated_at: iso(activateAt) }));
      await tx.markLogged(key.kid, 'activation');
    }
    this.#keys.set(key.kid, key);
    return key.kid;
  }

  /**
   * The schedule's transitions, by one replica at a time: the first key (or PLATFORM_OIDC_PRIVATE_KEY imported),
   * the next key when the current one nears the end of its lifetime, and the audit rows of activations and
   * retirements that happened by the clock. True when a key was created.
   */
  async #transitions(wait: boolean): Promise<boolean> {
    const created = await this.#store.locked(wait, async (tx) => {
      const now = Date.now();
      // Rows the previous release wrote get their schedule sealed as they are now (trust on first sight:
      // docs/security.md says what that leaves while both releases run).
      for (const r of tx.rows) {
        if (r.scheduleMac !== undefined || this.#undecryptable.has(r.kid)) continue;
        r.scheduleMac = this.#scheduleMac.mac(r);
        await tx.adopt(r.kid, r.scheduleMac);
        this.#deps.log.info({ kid: r.kid }, 'signing key schedule sealed (a row of the previous release)');
      }
      const rows = this.#trusted(tx.rows);
      const d = deriveStates(rows, now);
      const lifetimeMs = this.#conf.lifetimeSeconds * 1000;
      const aheadMs = this.#conf.publishAheadSeconds * 1000;
      let made = false;
      if (d.current === undefined && !rows.some((r) => d.keys.get(r.kid)?.state === 'next')) {
        await this.#bootstrap(tx, now);
        made = true;
      } else if (d.current !== undefined) {
        const current = rows.find((r) => r.kid === d.current)!;
        const pending = rows.some((r) => ['next', 'scheduled'].includes(d.keys.get(r.kid)!.state));
        if (!pending && now >= nextKeyDueAt(current.activateAt, lifetimeMs, aheadMs)) {
          await this.#create(
            tx,
            'schedule',
            now,
            Math.max(now + aheadMs, current.activateAt + lifetimeMs),
            SCHEDULE_ACTOR,
          );
          made = true;
        }
      }
      const audit = createAdminAuditStore(tx.client);
      for (const r of rows) {
        const k = d.keys.get(r.kid)!;
        if (
          !r.activationLogged &&
          (k.state === 'current' || k.state === 'previous' || k.state === 'expired')
        ) {
          await audit.record(
            keyEvent(SCHEDULE_ACTOR, 'key-activated', r.kid, { activated_at: iso(r.activateAt) }),
          );
          await tx.markLogged(r.kid, 'activation');
        }
        if (!r.retirementLogged && (k.state === 'previous' || k.state === 'expired')) {
          await audit.record(
            keyEvent(SCHEDULE_ACTOR, 'key-retired', r.kid, {
              retired_at: iso(k.retiredAt),
              unpublish_at: iso(k.unpublishAt),
            }),
          );
          await tx.markLogged(r.kid, 'retirement');
        }
      }
      return made;
    });
    if (created) await this.#notify([], undefined);
    return created === true;
  }

  /** An empty table: PLATFORM_OIDC_PRIVATE_KEY's keys imported (the first signs on), else a new key. */
  async #bootstrap(tx: TxKeys, now: number): Promise<void> {
    const { privateKey } = this.#deps.config;
    if (privateKey !== undefined && tx.rows.length === 0) {
      const keys = await loadSigningKeys(privateKey).catch((err: Error) => {
        throw new ConfigError('PLATFORM_OIDC_PRIVATE_KEY', err.message);
      });
      // The others are published as retired just before the first: tokens they signed keep verifying.
      for (const [i, key] of [...keys.entries()].reverse())
        await this.#insert(tx, key, 'imported', now - i, now - i, SCHEDULE_ACTOR);
      this.#deps.log.info(
        { kids: keys.map((k) => k.kid) },
        'PLATFORM_OIDC_PRIVATE_KEY imported for rotation',
      );
      return;
    }
    await this.#create(tx, 'initial', now, now, SCHEDULE_ACTOR);
  }

  /**
   * The rows the schedule is derived from: those whose schedule seal holds (or that have none yet: written by the
   * previous release) and whose private key decrypts. Another row is left out — neither published nor signing —
   * with one log line: an altered schedule, or a row planted without the encryption key.
   */
  #trusted(rows: readonly StoredKey[]): StoredKey[] {
    return rows.filter((r) => {
      if (this.#undecryptable.has(r.kid)) return false;
      if (r.scheduleMac === undefined || this.#scheduleMac.valid(r, r.scheduleMac)) return true;
      if (!this.#distrusted.has(r.kid)) {
        this.#distrusted.add(r.kid);
        this.#deps.log.warn(
          { kid: r.kid },
          'signing key left out: its schedule (publish, activate, withdrawn times) does not match its seal',
        );
      }
      return false;
    });
  }

  /** Re-reads the table (a few rows) and decrypts keys not seen before. */
  async #load(): Promise<void> {
    const all = await this.#store.list();
    const now = Date.now();
    // Not one seal holds: most likely another PLATFORM_KEY_ENCRYPTION_KEY. A private key's seal tells.
    const sealed = all.filter((r) => r.scheduleMac !== undefined);
    if (sealed.length > 0 && sealed.every((r) => !this.#scheduleMac.valid(r, r.scheduleMac!))) {
      try {
        this.#sealer.open(sealed[0]!.kid, sealed[0]!.sealed);
      } catch (err) {
        if (err instanceof KeyDecryptionError)
          throw new ConfigError('PLATFORM_KEY_ENCRYPTION_KEY', err.message);
        throw err;
      }
    }
    // A key that does not decrypt is left out and the states derived again without it (it may have been the
    // latest). None decrypting at all is a wrong PLATFORM_KEY_ENCRYPTION_KEY: start-up stops, naming it.
    let failure: KeyDecryptionError | undefined;
    let rows: StoredKey[];
    for (;;) {
      rows = this.#trusted(all);
      const d = deriveStates(rows, now);
      const failed = await this.#decrypt(rows, d);
      if (!failed) break;
      failure ??= failed;
    }
    if (failure && this.#keys.size === 0)
      throw new ConfigError('PLATFORM_KEY_ENCRYPTION_KEY', failure.message);
    this.#rows = rows;
    this.#recompute(now);
  }

  /** Decrypts the live keys not seen before; the first that does not decrypt is noted and returned. */
  async #decrypt(rows: readonly StoredKey[], d: Derived): Promise<KeyDecryptionError | undefined> {
    for (const r of rows) {
      const state = d.keys.get(r.kid)!.state;
      if (this.#keys.has(r.kid) || state === 'withdrawn' || state === 'expired') continue;
      let key: SigningKey;
      try {
        const der = this.#sealer.open(r.kid, r.sealed);
        key = await fromKeyObject(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }), r.kid);
        if (key.publicJwk.n !== r.publicJwk.n)
          throw new KeyDecryptionError(r.kid, 'does not match its stored public key');
      } catch (err) {
        if (!(err instanceof KeyDecryptionError)) throw err;
        this.#undecryptable.add(r.kid);
        this.#deps.log.warn({ kid: r.kid, reason: err.message }, 'signing key left out');
        return err;
      }
      this.#keys.set(r.kid, key);
    }
    return undefined;
  }

  #recompute(now = Date.now()): void {
    const d = deriveStates(this.#rows, now);
    this.#derived = d;
    this.#published = d.published.map((kid) => this.#keys.get(kid)).filter((k): k is SigningKey => !!k);
    this.#jwks = { body: jwksBody(this.#published), maxAge: jwksMaxAge(this.#conf.publishAheadSeconds) };
    const current = d.current && this.#keys.get(d.current);
    if (current) {
      let s = this.#signers.get(current.kid);
      if (!s) {
        s = new JwtSigner(current);
        this.#signers.set(current.kid, s);
      }
      if (this.#signer?.kid !== s.kid)
        this.#deps.log.info({ kid: s.kid, published: d.published }, 'signing key in use');
      this.#signer = s;
    }
    this.#changesAt = d.changesAt;
  }

  async #tick(): Promise<void> {
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      await this.#load();
      if (await this.#transitions(false)) await this.#load();
    } catch (err) {
      // Postgres away: the keys read last keep working; the schedule is derived from them by the clock.
      this.#deps.log.warn({ err: { message: (err as Error).message } }, 'signing keys not re-read');
    } finally {
      this.#ticking = false;
    }
  }

  async #subscribe(redis: RedisClient): Promise<void> {
    // A Cluster's duplicate subscribes through one of its nodes (PUBLISH reaches every node).
    const sub: RedisClient = isCluster(redis) ? redis.duplicate() : redis.duplicate();
    this.#subscriber = sub;
    sub.on('error', () => {});
    sub.on('message', (channel: string, message: string) => {
      if (channel !== KEY_NOTICE_CHANNEL) return;
      const n = parseKeyNotice(message);
      if (n?.issuer === this.#deps.config.issuer) void this.#tick();
    });
    await sub.subscribe(KEY_NOTICE_CHANNEL).catch((err: Error) => {
      this.#deps.log.warn({ err: { message: err.message } }, 'key notices not subscribed: polling only');
    });
  }

  /** Tells the other replicas to re-read, and gateways to refetch (dropping `withdrawn` at once). */
  async #notify(withdrawn: string[], signing: string | undefined): Promise<void> {
    const { redis, config, log } = this.#deps;
    if (!redis) return;
    const m = redis.multi();
    // A withdrawn key must not come back from the gateways' shared copy of the key set.
    if (withdrawn.length > 0) m.del(jwksKey(config.issuer));
    m.publish(KEY_NOTICE_CHANNEL, encodeKeyNotice({ issuer: config.issuer, withdrawn, signing }));
    await m
      .exec()
      .catch((err: Error) => log.warn({ err: { message: err.message } }, 'key notice not published'));
  }
}

function outcome(
  kid: string,
  created: boolean,
  emergency: boolean,
  publishAt: number,
  activateAt: number,
  withdrawn: string[],
): RotationOutcome {
  return { kid, created, emergency, publish_at: iso(publishAt)!, activate_at: iso(activateAt)!, withdrawn };
}

function keyEvent(actor: KeyActor, action: string, kid: string, detail: Record<string, unknown>) {
  return {
    actorEmail: actor.email,
    actorSub: actor.sub,
    actorClientId: actor.clientId,
    requestId: actor.requestId,
    action,
    target: kid,
    detail,
  };
}
