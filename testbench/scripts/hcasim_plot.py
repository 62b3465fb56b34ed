#!/usr/bin/python3
"""Draws hcasim results with matplotlib; `hcasim plot` runs it.

Inputs (docs/sweeps-and-plots.md):
  - hcasim lat / bw / mcast output, --format json or csv: one line per file
    (and per multicast receiver) against message size;
  - hcasim sweep tables, .csv or .json: one line per parameter combination,
    against message size, or, for results without sizes (msgrate), the
    total against the first swept parameter; swarm sweeps: the READ rate per
    machine against the active QPs per machine, a line per combination of
    the swept configuration keys;
  - calibration tables, CSV with the columns name,published,measured and
    optionally unit (hcasim calibrate --format csv prints one; its
    --format json is read too): the model's deviation from each published
    figure.
The figure is PNG or SVG by the output file's extension. Bad input ends the
script with a message naming the file and exit status 2.
"""
import argparse
import csv
import io
import json
import os
import sys

# Configuration keys are "section.name" and swept workload options "--name";
# a workload's own columns have neither.
PARAMETER_MARK = "."
OPTION_MARK = "--"
CALIBRATION_COLUMNS = ("name", "published", "measured")
DEFAULT_Y = ("t_typical_us", "bw_avg_MBps")
UNITS = (("_us", "µs"), ("_MBps", "MB/s, MB = 2^20 bytes"), ("_Mpps", "Mpps"))


class BadInput(Exception):
    pass


class Table:
    """One input file: its columns, its rows (dicts), the parameter columns."""

    def __init__(self, source, label, columns, rows, parameters, title=None):
        self.source = source
        self.label = label
        self.columns = columns
        self.rows = rows
        self.parameters = parameters
        self.title = title

    def is_calibration(self):
        return all(c in self.columns for c in CALIBRATION_COLUMNS)


def read_text(path):
    if path == "-":
        return sys.stdin.read()
    if not os.path.exists(path):
        raise BadInput(f"{path}: no such file")
    if not os.path.isfile(path):
        raise BadInput(f"{path}: not a regular file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read it: {e}")


def format_of(path, text):
    if path == "-":
        return "json" if text.lstrip().startswith("{") else "csv"
    ext = os.path.splitext(path)[1].lower()
    if ext in (".json", ".csv"):
        return ext[1:]
    raise BadInput(f"{path}: unknown format '{ext or '(no extension)'}': expected a .csv or .json file")


def json_table(path, label, text):
    # hcasim --counters adds a second JSON line; a sweep table spans lines.
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        documents = []
        for line in text.splitlines():
            try:
                documents.append(json.loads(line))
            except json.JSONDecodeError:
                pass
        if not documents:
            raise BadInput(f"{path}: not JSON")
    for d in documents:
        if not isinstance(d, dict):
            continue
        if "parameters" in d and "columns" in d:  # hcasim sweep
            keys = [p.get("key") for p in d["parameters"]]
            title = "hcasim sweep: " + " ".join(d.get("workload", []))
            return Table(path, label, list(d["columns"]), list(d.get("rows", [])), keys, title)
        if isinstance(d.get("rows"), list):  # hcasim lat, bw, mcast
            rows = d["rows"]
            columns = list(rows[0].keys()) if rows and isinstance(rows[0], dict) else []
            return Table(path, label, columns, rows, [], d.get("title"))
        if isinstance(d.get("points"), list):  # hcasim calibrate
            points = [p for p in d["points"] if isinstance(p, dict)]
            columns = list(dict.fromkeys(["name", "published", "measured"] + [k for p in points for k in p]))
            return Table(path, label, columns, points, [])
        if isinstance(d.get("qps"), list):  # hcasim msgrate: no sizes
            return Table(path, label, ["qp", "messages", "msg_rate_Mpps"], d["qps"], [], d.get("title"))
    raise BadInput(f"{path}: holds no hcasim results (no rows)")


def csv_table(path, label, text):
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not any(rows[0]):
        raise BadInput(f"{path}: empty: expected a CSV header line and rows")
    header = [h.strip() for h in rows[0]]
    data = []
    for n, r in enumerate(rows[1:], start=2):
        if not r:
            continue
        if len(r) != len(header):
            raise BadInput(f"{path}:{n}: {len(r)} fields, the header has {len(header)}")
        data.append(dict(zip(header, r)))
    parameters = [h for h in header if PARAMETER_MARK in h or h.startswith(OPTION_MARK)]
    return Table(path, label, header, data, parameters)


def load(path):
    text = read_text(path)
    label = "stdin" if path == "-" else os.path.splitext(os.path.basename(path))[0]
    table = json_table(path, label, text) if format_of(path, text) == "json" else csv_table(path, label, text)
    if not table.rows:
        raise BadInput(f"{path}: no rows")
    return table


def number(table, row, column):
    value = row.get(column)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{table.source}: '{value}' in column {column} is not a number")


def size_label(value, _position=None):
    v = int(round(value))
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if v >= div and v % div == 0:
            return f"{v // div}{unit}"
    return str(v)


def axis_label(column):
    for suffix, unit in UNITS:
        if column.endswith(suffix):
            return f"{column} ({unit})"
    return column


def draw_against_size(plt, tables, y, title):
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for t in tables:
        if "bytes" not in t.columns:
            raise BadInput(f"{t.source}: no column bytes: plot draws against message size; its columns: "
                           f"{', '.join(t.columns)}")
    if y is None:
        y = next((c for c in DEFAULT_Y if c in tables[0].columns), None)
        if y is None:
            raise BadInput(f"{tables[0].source}: no {' or '.join(DEFAULT_Y)} column: name the column to draw with --y")
    fig, ax = plt.subplots(figsize=(8, 5))
    lines = 0
    for t in tables:
        if y not in t.columns:
            raise BadInput(f"{t.source}: no column {y} to draw; its columns: {', '.join(t.columns)}")
        # A line per parameter combination (and receiver), in the order met.
        group_by = t.parameters + (["receiver"] if "receiver" in t.columns else [])
        series = {}
        for row in t.rows:
            key = tuple(str(row.get(c)) for c in group_by)
            series.setdefault(key, []).append((number(t, row, "bytes"), number(t, row, y)))
        for key, points in series.items():
            points.sort()
            parts = [f"{c}={v}" for c, v in zip(group_by, key) if c != "receiver"]
            parts += [v for c, v in zip(group_by, key) if c == "receiver"]
            if len(tables) > 1 or not parts:
                parts.insert(0, t.label)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=", ".join(parts))
            lines += 1
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if y.endswith("_us"):
        ax.set_yscale("log")  # latency spans orders of magnitude over the sizes
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(axis_label(y))
    titles = {t.title for t in tables}
    ax.set_title(title or (titles.pop() if len(titles) == 1 and None not in titles else f"hcasim: {y}"))
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.legend(fontsize="small" if lines <= 12 else "x-small", ncol=1 if lines <= 12 else 2)
    return fig


def draw_against_parameter(plt, tables, y, title):
    """Results without sizes (msgrate sweeps): the total against the first
    swept parameter, a line per combination of the others. Swarm sweeps: the
    rate against the active QPs per machine (which the swept workload options
    set), a line per combination of the swept configuration keys."""
    swarm = all("active_qps" in t.columns for t in tables)
    x = "active_qps" if swarm else None
    for t in tables if not swarm else []:
        if not t.parameters:
            raise BadInput(f"{t.source}: no column bytes and no swept parameter: nothing to draw against; its "
                           f"columns: {', '.join(t.columns)}")
        x = x or t.parameters[0]
        if x not in t.parameters:
            raise BadInput(f"{t.source}: does not sweep {x}, which {tables[0].source} is drawn against")
    y = y or next((c for c in ("msg_rate_Mpps", "read_rate_Mops_per_machine") + DEFAULT_Y if c in tables[0].columns),
                  None)
    if y is None:
        raise BadInput(f"{tables[0].source}: name the column to draw with --y")
    fig, ax = plt.subplots(figsize=(8, 5))
    values = []
    for t in tables:
        if y not in t.columns:
            raise BadInput(f"{t.source}: no column {y} to draw; its columns: {', '.join(t.columns)}")
        group_by = [p for p in t.parameters if p != x and not (swarm and p.startswith(OPTION_MARK))]
        series = {}
        for row in t.rows:
            if "qp" in t.columns and str(row.get("qp")) != "total":
                continue  # msgrate: each QP's row; the total is drawn
            key = tuple(str(row.get(c)) for c in group_by)
            series.setdefault(key, []).append((number(t, row, x), number(t, row, y)))
        for key, points in series.items():
            points.sort()
            values += [p[0] for p in points]
            parts = [f"{c}={v}" for c, v in zip(group_by, key)]
            if len(tables) > 1 or not parts:
                parts.insert(0, t.label)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=", ".join(parts))
    if values and min(values) > 0 and max(values) >= 8 * min(values):
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(size_label))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x)
    ax.set_ylabel(axis_label(y))
    titles = {t.title for t in tables}
    ax.set_title(title or (titles.pop() if len(titles) == 1 and None not in titles else f"hcasim: {y} against {x}"))
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.legend(fontsize="small")
    return fig


def draw_calibration(plt, tables, title):
    names, deviations, notes, agreed = [], [], [], []
    for t in tables:
        for row in t.rows:
            # hcasim calibrate says itself whether a point agrees (an upper
            # bound such as "below 1 us" agrees when the model is below it).
            verdict = str(row.get("within_tolerance", "")).strip().lower()
            agreed.append(True if verdict in ("true", "1", "yes") else False if verdict in ("false", "0", "no") else None)
            published = number(t, row, "published")
            if published == 0:
                raise BadInput(f"{t.source}: published figure of '{row.get('name')}' is 0: no deviation to draw")
            unit = (row.get("unit") or "").strip()
            name = str(row.get("name") or "").strip() or "(no name)"
            # A calibrate sweep has a row per point and design point: say which.
            design = ", ".join(f"{k}={row.get(k)}" for k in t.parameters)
            name = f"{design}: {name}" if design else name
            names.append(name if len(tables) == 1 else f"{t.label}: {name}")
            # A point hcasim calibrate could not run has no measured figure.
            if row.get("measured") in (None, ""):
                deviations.append(None)
                notes.append(f"not measured / published {published:.4g}{' ' + unit if unit else ''}")
                continue
            measured = number(t, row, "measured")
            deviations.append((measured - published) / published * 100.0)
            notes.append(f"model {measured:.4g} / published {published:.4g}{' ' + unit if unit else ''}")
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * len(names)))
    positions = list(range(len(names)))[::-1]  # first row at the top
    drawn = [0.0 if d is None else d for d in deviations]
    # Rounded first: 2.2 against 2 is 10 %, not 10.000000000000009 %.
    def colour(d, ok):
        if ok is True or (ok is None and round(abs(d), 9) <= 10):
            return "tab:green"
        return "tab:orange" if round(abs(d), 9) <= 25 else "tab:red"
    colours = [colour(d, ok) for d, ok in zip(drawn, agreed)]
    ax.barh(positions, drawn, color=colours)
    ax.set_yticks(positions)
    ax.set_yticklabels(names)
    ax.axvline(0, color="black", linewidth=0.8)
    span = max(10.0, max(abs(d) for d in drawn)) * 1.15
    ax.set_xlim(-span, span)
    # The figures behind each bar, as labels on the right.
    figures = ax.twinx()
    figures.set_ylim(ax.get_ylim())
    figures.set_yticks(positions)
    figures.set_yticklabels([note if d is None else f"{d:+.1f}%: {note}" for d, note in zip(deviations, notes)],
                            fontsize="small")
    ax.set_xlabel("model against published figure (%)")
    ax.set_title(title or "hcasim against published figures")
    ax.grid(True, axis="x", linewidth=0.5, alpha=0.5)
    return fig


def main():
    parser = argparse.ArgumentParser(prog="hcasim plot")
    parser.add_argument("--out", required=True)
    parser.add_argument("--y")
    parser.add_argument("--title")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    ext = os.path.splitext(args.out)[1].lower()
    if ext not in (".png", ".svg"):
        raise BadInput(f"--out {args.out}: the name must end in .png or .svg")
    if args.files.count("-") > 1:
        raise BadInput("standard input (-) can be read once")
    tables = [load(p) for p in args.files]
    calibration = [t for t in tables if t.is_calibration()]
    if calibration and len(calibration) != len(tables):
        other = next(t for t in tables if not t.is_calibration())
        raise BadInput(f"{calibration[0].source} is a calibration table and {other.source} is not: draw them apart")
    try:
        import matplotlib
    except ImportError:
        print("hcasim: error: plot needs matplotlib for /usr/bin/python3 (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 1
    matplotlib.use("Agg")
    # The same input gives the same SVG bytes: fixed ids, no date.
    matplotlib.rcParams["svg.hashsalt"] = "hcasim"
    import matplotlib.pyplot as plt

    if calibration:
        fig = draw_calibration(plt, tables, args.title)
    elif all("bytes" not in t.columns or "active_qps" in t.columns for t in tables):
        fig = draw_against_parameter(plt, tables, args.y, args.title)
    else:
        fig = draw_against_size(plt, tables, args.y, args.title)
    fig.tight_layout()
    metadata = {"Date": None} if ext == ".svg" else {"Software": None}
    try:
        fig.savefig(args.out, format=ext[1:], metadata=metadata)
    except OSError as e:
        print(f"hcasim: error: cannot write {args.out}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as e:
        print(f"hcasim: error: {e}", file=sys.stderr)
        sys.exit(2)
