// Builds elements without innerHTML, so document text can never become markup.
import { errorText } from "./api";

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { className?: string; text?: string; attrs?: Record<string, string> } = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (props.className) e.className = props.className;
  if (props.text != null) e.textContent = props.text;
  for (const [k, v] of Object.entries(props.attrs ?? {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`missing #${id}`);
  return e as T;
}

/// Wraps an action so that its failure is said in `where`, which is emptied each time it runs.
export function sayingErrorsIn(where: HTMLElement) {
  return (action: () => Promise<unknown>) => async () => {
    where.textContent = "";
    try {
      await action();
    } catch (e) {
      where.textContent = errorText(e);
    }
  };
}
