// The lock screen (unlock, a first passphrase, a key backup's way back in) and the key's panel:
// where the key is kept, and the offer to back it up.
import { api, errorText, type AppStatus } from "./api";
import { byId, el, sayingErrorsIn } from "./dom";
import { newPassphraseProblem } from "./format";
import { t } from "./i18n";

/// Shows the lock screen while the library is locked, with the fields its state asks for.
export function showLock(engine: AppStatus["engine"]) {
  const screen = byId("lock-screen");
  screen.hidden = engine.state !== "locked";
  if (engine.state !== "locked") return;
  const choosing = engine.new_collection;
  byId("lock-title").textContent = choosing ? t("lock.choose") : t("lock.locked");
  byId("lock-reason").textContent = engine.reason;
  byId("unlock-passphrase-label").hidden = !engine.needs_passphrase;
  byId("confirm-passphrase-label").hidden = !choosing;
  byId<HTMLInputElement>("unlock-passphrase-input").autocomplete = choosing ? "new-password" : "current-password";
  byId("lock-import").hidden = !engine.key_missing;
  // A passphrase forgotten: the way back in is a key backup, offered right here (Settings is
  // out of reach under the lock).
  byId("lock-restore").hidden = !engine.needs_passphrase || choosing || engine.key_missing;
  byId("unlock-button").hidden = engine.key_missing;
  byId("unlock-button").textContent = choosing ? t("lock.protect") : t("lock.unlock");
  byId("lock-detail").hidden = engine.detail === "";
  byId("lock-detail-text").textContent = engine.detail;
}

/// Wires the Lock button and the lock screen's forms. `locking`: runs before the library locks
/// (the conversation and passages on screen go with it).
export function setupLock(locking: () => void) {
  const error = byId("lock-error");
  const run = sayingErrorsIn(error);
  byId("lock-button").addEventListener("click", run(async () => {
    locking();
    await api.lock();
  }));
  byId("unlock-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = byId<HTMLInputElement>("unlock-passphrase-input");
    const confirm = byId<HTMLInputElement>("confirm-passphrase-input");
    const passphrase = input.value;
    if (!byId("confirm-passphrase-label").hidden) {
      const problem = newPassphraseProblem(passphrase, confirm.value);
      if (problem) {
        error.textContent = problem;
        confirm.value = "";
        (passphrase === "" ? input : confirm).focus();
        return;
      }
    }
    input.value = "";
    confirm.value = "";
    void run(() => api.unlock(passphrase || null))();
  });
  byId("lock-import-button").addEventListener("click", run(async () => {
    const input = byId<HTMLInputElement>("lock-import-passphrase");
    const pass = input.value;
    input.value = "";
    await api.importKey(pass, null);
  }));
  byId("restore-button").addEventListener("click", run(async () => {
    const fresh = byId<HTMLInputElement>("restore-new-passphrase");
    const again = byId<HTMLInputElement>("restore-confirm-passphrase");
    const problem = newPassphraseProblem(fresh.value, again.value);
    if (problem) {
      error.textContent = problem;
      return;
    }
    const backup = byId<HTMLInputElement>("restore-backup-passphrase");
    const [newPassphrase, backupPassphrase] = [fresh.value, backup.value];
    fresh.value = again.value = backup.value = "";
    if (await api.importKey(backupPassphrase, newPassphrase))
      byId("ingest-summary").append(
        el("p", { text: t("lock.restored") }),
      );
  }));
}

/// The key's line in Settings and the offer to back the key up: made once there is something to
/// lose, until a backup of the current key exists. "Later" asks again at the next start.
export class KeyPanel {
  private later = false;

  /// `documents`: how many documents the library holds now.
  constructor(private readonly documents: () => number) {}

  async show() {
    try {
      const k = await api.keyStatus();
      const where = t(k.store === "keychain" ? "key.whereKeychain" : k.store === "passphrase" ? "key.wherePassphrase" : "key.whereMemory");
      byId("key-info").textContent = k.rotating_from.length
        ? t("key.infoReplacing", { id: k.key_id, where, keys: k.rotating_from.join(", ") })
        : t("key.info", { id: k.key_id, where });
      // What protects the data, said for this library: a passphrase library has no keychain.
      byId("privacy-hint").textContent = t(k.store === "passphrase" ? "key.privacyPassphrase" : k.store === "keychain" ? "key.privacyKeychain" : "key.privacy");
      byId("backup-offer").hidden = k.backed_up || k.store === "memory" || this.later || this.documents() === 0;
      byId("backup-offer-text").textContent = t(k.store === "passphrase" ? "key.offerPassphrase" : "key.offerKeychain");
    } catch {
      byId("key-info").textContent = "";
    }
  }

  setupOffer() {
    const message = byId("backup-offer-message");
    byId("backup-offer-button").addEventListener("click", async () => {
      const input = byId<HTMLInputElement>("backup-offer-passphrase");
      message.textContent = "";
      try {
        const where = await api.exportKey(input.value);
        if (!where) return;
        input.value = "";
        byId("ingest-summary").append(el("p", { text: t("key.saved", { where }) }));
        await this.show();
      } catch (e) {
        message.textContent = errorText(e);
      }
    });
    byId("backup-later-button").addEventListener("click", () => {
      this.later = true;
      byId("backup-offer").hidden = true;
    });
  }
}
