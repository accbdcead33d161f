// A strategy's params form, generated from its pydantic JSON schema.
// Only values that differ from the defaults are sent, so the server's defaults stay in charge.

import { h } from "./dom.js";

function kindOf(prop) {
  if (prop.type) return prop.type;
  const types = (prop.anyOf || []).map((p) => p.type).filter((t) => t && t !== "null");
  return types[0] || "string";
}

// "score | norm_score | rrf (SELECTORS)" -> ["score", "norm_score", "rrf"]
function choicesOf(prop) {
  if (prop.enum) return prop.enum;
  const m = /^\s*([\w.-]+(?:\s*\|\s*[\w.-]+)+)/.exec(prop.description || "");
  return m ? m[1].split("|").map((x) => x.trim()) : null;
}

export class ParamsForm {
  constructor(root) {
    this.root = root;
    this.fields = [];
    this.sourceNames = [];
  }

  setSources(names) {
    this.sourceNames = names;
    for (const f of this.fields) if (f.isSource) f.refresh();
  }

  render(schema) {
    this.root.replaceChildren();
    this.fields = [];
    const props = schema.properties || {};
    for (const [name, prop] of Object.entries(props)) {
      const kind = kindOf(prop);
      const field = this.field(name, prop, kind);
      const touch = () => { field.touched = true; };
      field.el.addEventListener("input", touch);
      field.el.addEventListener("change", touch);
      this.fields.push(field);
      const label = h("label", { class: "param", title: prop.description || "" },
        h("span", { class: "pname", text: name }), field.el);
      this.root.append(label);
    }
  }

  field(name, prop, kind) {
    const dflt = prop.default;
    const id = `param-${name}`;
    if (kind === "boolean") {
      const el = h("input", { type: "checkbox", id, "data-param": name });
      el.checked = Boolean(dflt);
      return { name, el, value: () => el.checked, dflt };
    }
    if (kind === "integer" || kind === "number") {
      const el = h("input", { type: "number", id, "data-param": name, step: kind === "integer" ? 1 : "any" });
      if (prop.minimum !== undefined) el.min = prop.minimum;
      if (prop.maximum !== undefined) el.max = prop.maximum;
      if (dflt !== undefined && dflt !== null) el.value = dflt;
      return { name, el, dflt, value: () => (el.value === "" ? dflt : Number(el.value)) };
    }
    if (kind === "array" || kind === "object") {
      const el = h("input", { id, "data-param": name, placeholder: dflt === null || dflt === undefined ? "(default)" : JSON.stringify(dflt) });
      return {
        name, el, dflt, json: true,
        value: () => {
          if (el.value.trim() === "") return dflt;
          try { return JSON.parse(el.value); } catch { throw new Error(`${name}: not valid JSON`); }
        },
      };
    }
    const isSource = name === "source" || name.endsWith("_source");
    const choices = choicesOf(prop);
    if (isSource || choices) {
      const el = h("select", { id, "data-param": name });
      const field = { name, el, dflt, isSource, value: () => el.value };
      field.refresh = () => {
        const current = el.value || dflt;
        // a source field offers the mounted sources only (its default when mounted, first)
        const mounted = this.sourceNames.length ? this.sourceNames : [dflt];
        const options = isSource ? [...new Set([dflt, ...mounted].filter((o) => o && mounted.includes(o)))] : choices;
        el.replaceChildren(...options.map((o) => h("option", { value: o, text: o })));
        el.value = options.includes(current) ? current : options[0];
      };
      field.refresh();
      return field;
    }
    const el = h("input", { id, "data-param": name, value: dflt ?? "" });
    return { name, el, dflt, value: () => (el.value === "" && dflt === null ? null : el.value) };
  }

  // The params to send: the ones the user changed (and source fields, whose default may not be
  // mounted), when they differ from the schema's defaults.
  values() {
    const out = {};
    for (const f of this.fields) {
      if (!f.touched && !f.isSource) continue;
      const v = f.value();
      if (JSON.stringify(v) !== JSON.stringify(f.dflt) && v !== undefined) out[f.name] = v;
    }
    return out;
  }

  set(name, value) {
    const f = this.fields.find((x) => x.name === name);
    if (!f) return;
    f.touched = true;
    if (f.el.type === "checkbox") f.el.checked = Boolean(value);
    else f.el.value = typeof value === "object" ? JSON.stringify(value) : value;
  }
}
