"""Reads a workbook with openpyxl (an implementation dawnpost does not use) and prints, as one
JSON object, its title, its first sheet's name, every cell of it with its type (number,
datetime, text or empty), whether each header cell is bold, and the columns' widths:
xlsx_cells.py FILE."""
import datetime
import json
import sys

import openpyxl

book = openpyxl.load_workbook(sys.argv[1])
sheet = book.worksheets[0]


def cell(c):
    v = c.value
    if isinstance(v, datetime.datetime):
        return {"type": "datetime", "value": v.isoformat()}
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"type": "number", "value": v}
    if v is None:
        return {"type": "empty"}
    return {"type": "text", "value": str(v)}


print(json.dumps({
    "title": book.properties.title,
    "sheet": sheet.title,
    "rows": [[cell(c) for c in row] for row in sheet.iter_rows()],
    "bold": [bool(c.font.bold) for c in sheet[1]],
    "widths": [sheet.column_dimensions[c.column_letter].width for c in sheet[1]],
}))
