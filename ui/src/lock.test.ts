import page from "../index.html?raw";
import { api, type AppStatus } from "./api";
import { setupLock, showLock } from "./lock";

vi.mock("./api", async (original) => ({
  ...(await original<typeof import("./api")>()),
  api: { lock: vi.fn(async () => null), unlock: vi.fn(async () => null), importKey: vi.fn(async () => true) },
}));

type Engine = AppStatus["engine"];
const locked = (over: Partial<Extract<Engine, { state: "locked" }>> = {}): Engine => ({
  state: "locked", reason: "Enter your passphrase.", detail: "", needs_passphrase: true, new_collection: false, key_missing: false, ...over,
});
const shown = (id: string) => !document.getElementById(id)!.hidden;
const input = (id: string) => document.getElementById(id) as HTMLInputElement;
const text = (id: string) => document.getElementById(id)!.textContent;

beforeEach(() => {
  document.body.innerHTML = new DOMParser().parseFromString(page, "text/html").body.innerHTML;
  vi.clearAllMocks();
});

describe("the lock screen", () => {
  it("is away while the library is open", () => {
    showLock(locked());
    showLock({ state: "ready" });
    expect(shown("lock-screen")).toBe(false);
  });

  it("asks for the passphrase, with the way back in for a forgotten one", () => {
    showLock(locked());
    expect(shown("lock-screen")).toBe(true);
    expect(text("lock-title")).toBe("Quire is locked");
    expect(text("unlock-button")).toBe("Unlock");
    expect([shown("unlock-passphrase-label"), shown("confirm-passphrase-label"), shown("lock-restore"), shown("lock-import")]).toEqual([true, false, true, false]);
    expect(shown("lock-detail")).toBe(false);
  });

  it("has a new library's passphrase typed twice, and no restore to offer", () => {
    showLock(locked({ new_collection: true, reason: "Choose a passphrase." }));
    expect(text("lock-title")).toBe("Choose a passphrase");
    expect(text("unlock-button")).toBe("Protect my library");
    expect(input("unlock-passphrase-input").autocomplete).toBe("new-password");
    expect([shown("confirm-passphrase-label"), shown("lock-restore")]).toEqual([true, false]);
  });

  it("offers only the key backup when the key is missing, and what the system said", () => {
    showLock(locked({ key_missing: true, needs_passphrase: false, detail: "vault.json: not found" }));
    expect([shown("lock-import"), shown("unlock-button"), shown("lock-restore")]).toEqual([true, false, false]);
    expect(shown("lock-detail")).toBe(true);
    expect(text("lock-detail-text")).toBe("vault.json: not found");
  });
});

describe("the lock screen's forms", () => {
  const submit = () => document.getElementById("unlock-form")!.dispatchEvent(new Event("submit", { cancelable: true }));

  it("unlocks with the passphrase typed, and forgets it from the field", async () => {
    setupLock(() => {});
    showLock(locked());
    input("unlock-passphrase-input").value = "correct horse";
    submit();
    await vi.waitFor(() => expect(api.unlock).toHaveBeenCalledWith("correct horse"));
    expect(input("unlock-passphrase-input").value).toBe("");
  });

  it("refuses a new passphrase typed differently twice, without unlocking", () => {
    setupLock(() => {});
    showLock(locked({ new_collection: true }));
    input("unlock-passphrase-input").value = "correct horse";
    input("confirm-passphrase-input").value = "correct hose";
    submit();
    expect(text("lock-error")).toBe("The two passphrases differ: type the same one twice.");
    expect(input("confirm-passphrase-input").value).toBe("");
    expect(api.unlock).not.toHaveBeenCalled();
  });

  it("restores from a key backup under a new passphrase", async () => {
    setupLock(() => {});
    showLock(locked());
    input("restore-new-passphrase").value = "a new passphrase";
    input("restore-confirm-passphrase").value = "a new passphrase";
    input("restore-backup-passphrase").value = "the backup's own";
    document.getElementById("restore-button")!.click();
    await vi.waitFor(() => expect(api.importKey).toHaveBeenCalledWith("the backup's own", "a new passphrase"));
    expect(input("restore-new-passphrase").value).toBe("");
  });

  it("says what the unlock failed on", async () => {
    vi.mocked(api.unlock).mockRejectedValueOnce("That passphrase does not open this library: try again.");
    setupLock(() => {});
    showLock(locked());
    input("unlock-passphrase-input").value = "wrong one";
    submit();
    await vi.waitFor(() => expect(text("lock-error")).toBe("That passphrase does not open this library: try again."));
  });

  it("clears what is on screen before locking", async () => {
    const order: string[] = [];
    vi.mocked(api.lock).mockImplementationOnce(async () => {
      order.push("lock");
      return null;
    });
    setupLock(() => void order.push("cleared"));
    document.getElementById("lock-button")!.click();
    await vi.waitFor(() => expect(order).toEqual(["cleared", "lock"]));
  });
});
