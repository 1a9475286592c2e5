// Small pure helpers for what the UI prints, in the language it speaks.
import { num, t, type Key } from "./i18n";

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v >= 100 || i === 0 ? num(Math.round(v)) : num(v, 1)} ${units[i]}`;
}

/// A count with its noun, as the language says it: "1 page", "3 pages", "3 Seiten", "3 ページ".
export function counted(n: number, noun: "page" | "passage" | "document" | "file"): string {
  return t(`count.${noun}` as Key, { n });
}

/// A Markdown passage as a person reads it: images (badges above all,
/// `[![build](https://…svg)](https://…)` or `[![build][badge]][link]`) as their alt text, and
/// the link definitions they point to (`[badge]: https://…`) left out, where the raw syntax is
/// long URLs that say nothing. Applied to each part of a passage split around its quote, so the
/// quote stays marked.
export function readableMarkdown(text: string): string {
  const target = String.raw`(?:\([^)\s]*\)|\[[^\]]*\])`;
  const image = String.raw`!\[([^\]]*)\]` + target;
  return text
    .replace(new RegExp(String.raw`\[` + image + String.raw`\]` + target, "g"), "$1")
    .replace(new RegExp(image, "g"), "$1")
    .replace(/^\[[^\]\n]+\]:[ \t]+\S+[^\n]*(?:\n|$)/gm, "");
}

/// A Rust `Duration` as serde writes it, in seconds.
export function seconds(d: { secs: number; nanos: number }): number {
  return d.secs + d.nanos / 1e9;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds);
  if (s < 60) return t("time.seconds", { s });
  const m = Math.floor(s / 60);
  if (m < 60) return t("time.minutes", { m, s: s % 60 });
  return t("time.hours", { h: Math.floor(m / 60), m: m % 60 });
}

/// Time left as a person would say it: coarse, so an estimate does not flicker.
export function formatTimeLeft(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  if (seconds < 10) return t("time.fewSeconds");
  if (seconds < 60) return t("time.aboutSeconds", { s: Math.round(seconds / 5) * 5 });
  if (seconds < 3600) return t("time.aboutMinutes", { m: Math.round(seconds / 60) });
  return t("time.about", { duration: formatDuration(Math.round(seconds / 600) * 600) });
}

export function fileName(path: string): string {
  const parts = path.split(/[\\/]/);
  return parts[parts.length - 1] || path;
}

export function location(path: string, page: number | null): string {
  return page == null ? fileName(path) : t("format.location", { file: fileName(path), page: String(page) });
}

/// Words quoted, in the language's quotation marks.
export function quoted(text: string): string {
  return t("format.quoted", { text });
}

/// Splits `text` around a byte range (Rust gives UTF-8 byte offsets; JS strings index UTF-16).
export function splitByteRange(text: string, range: [number, number] | null): [string, string, string] {
  if (!range) return [text, "", ""];
  const bytes = new TextEncoder().encode(text);
  const [start, end] = range;
  if (start < 0 || end > bytes.length || start > end) return [text, "", ""];
  const dec = new TextDecoder();
  return [dec.decode(bytes.slice(0, start)), dec.decode(bytes.slice(start, end)), dec.decode(bytes.slice(end))];
}

/** Why a new passphrase cannot be taken as typed (too short, or typed differently twice), or null. */
export function newPassphraseProblem(passphrase: string, again: string): string | null {
  if ([...passphrase].length < 8) return t("lock.tooShort");
  if (passphrase !== again) return t("lock.differ");
  return null;
}
