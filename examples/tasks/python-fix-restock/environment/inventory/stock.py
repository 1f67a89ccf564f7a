"""Stock keeping."""


def restock(items, threshold, batch):
    names = []
    for item in items:
        if item["qty"] < threshold:
            item["qty"] += batch
            names.append(item["name"])
    return names
