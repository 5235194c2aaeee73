"""Jupyter server configuration for ``make lab``: a save hook for the live figures.

``make lab`` starts JupyterLab with ``JUPYTER_CONFIG_PATH`` pointing here, so
the server loads this file as its configuration (``c`` below). It sets
:func:`strip_widget_views` as the hook the server runs on every notebook
before writing it to disk.

Why: an interactive figure's output holds the live widget (its
``application/vnd.jupyter.widget-view+json``) and, beside it, the figure at
its defaults with a line saying to run the cell again
(``InteractiveFigure.fallback_bundle`` in ``posenc_lib/widgets/core.py``).
JupyterLab renders the widget whenever an output holds one; in a notebook
reopened without the kernel that made it, the widget's model is gone and
JupyterLab shows "Error displaying widget: model not found" instead
(jupyterlab_widgets 3.0.17, ``WidgetRenderer.renderModel``; it never falls
back to the output's other formats). The hook removes the widget from those
outputs in the saved file only: the open notebook keeps its live sliders, and
the reopened one shows the still figure and the line. Outputs of other
widgets, which carry no such figure, are saved as they are.

The still figure the kernel put in the output is the one at the sliders'
defaults (a widget's callback cannot change a notebook output in JupyterLab:
``update_display_data`` reaches only the cell's own execution). So ``make lab``
also turns on jupyterlab-manager's ``saveState`` (labconfig/
default_setting_overrides.json): on every save JupyterLab puts the state of
every live widget in the notebook's metadata (``widgets``, with each image
widget's PNG in base64; ``serialize_state`` in @jupyter-widgets/base-manager,
jupyterlab_widgets 3.0.17). The hook takes from it the live figure's image
where the sliders were left (its image widget carries the class
``posenc-live-image``), drawn at twice the book's resolution, puts it in the
still figure's place with a line that says so, and drops the widget state from
the saved file (no view is left to use it).

It sets a second thing, :func:`refresh_git_index`, as the hook the server
runs after it has written a file. A save that adds only what the git filter of
``make lab`` strips (outputs, counts, ``language_info``) changes the file's
size, and git takes a size change for a content change without running the
filter (``ie_modified`` in git's read-cache.c returns at once when the size
recorded in the index differs), so ``git status`` listed every opened-and-saved
notebook as modified while ``git diff`` showed nothing. When ``git diff
--quiet`` holds for the saved notebook (the filter leaves it as staged), the
hook stages it again: the blob stays the same, only the index's record of the
file's size and time is refreshed. A notebook with a real change, or one git
does not track, is left alone.

It imports nothing from the project, so the server starts without torch.
Checked with jupyter_server 2.21.1 (the pinned one): a notebook PUT through
the contents API with a live figure's output is written without the widget
view, with the still figure (tests/figures/test_widgets.py checks the hook itself).
"""

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: The class of the ``text/html`` fallback that marks the book's live figures.
MARKER = "posenc-stale-figure"
#: Where JupyterLab saves the widgets' state (``metadata.widgets``) with ``saveState``.
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: The class of a live figure's image widget (``LIVE_IMAGE_CLASS`` in
#: posenc_lib/widgets/core.py).
LIVE_IMAGE = "posenc-live-image"
#: The end of the still figure's line (``STALE_NOTE``), and what it becomes.
AT_DEFAULTS = "below, the figure at its defaults."
WHERE_LEFT = "below, the figure where the sliders were left."


def _left_image(states, model_id, depth=0):
    """The base64 PNG of the live image inside widget ``model_id``, from the saved
    widget state ``states`` (``{model_id: {"model_name", "state", "buffers"}}``),
    or ``None``."""
    entry = states.get(model_id) if isinstance(model_id, str) else None
    if not isinstance(entry, dict) or depth > 8:
        return None
    state = entry.get("state") or {}
    if entry.get("model_name") == "ImageModel" and LIVE_IMAGE in (state.get("_dom_classes")
                                                                  or ()):
        for buffer in entry.get("buffers") or ():
            if buffer.get("path") == ["value"] and buffer.get("encoding") == "base64":
                data = buffer.get("data")
                return data if isinstance(data, str) and data.startswith("iVBOR") else None
        return None
    for child in state.get("children") or ():
        if isinstance(child, str) and child.startswith("IPY_MODEL_"):
            found = _left_image(states, child[len("IPY_MODEL_"):], depth + 1)
            if found:
                return found
    return None


def strip_widget_views(model, **_kwargs):
    """Drop the widget view from every output that also holds the book's still figure.

    Args:
        model: the contents model being saved (``model["content"]`` is the
            notebook as a dict); changed in place. Other kinds of file are
            left alone.
    """
    import re

    if not isinstance(model, dict) or model.get("type") != "notebook":
        return
    content = model.get("content") or {}
    metadata = content.get("metadata")
    widgets = metadata.get("widgets") if isinstance(metadata, dict) else None
    saved = widgets.get(WIDGET_STATE) if isinstance(widgets, dict) else None
    states = saved.get("state") if isinstance(saved, dict) else None
    states = states if isinstance(states, dict) else {}
    for cell in content.get("cells", []):
        for output in cell.get("outputs", None) or []:
            data = output.get("data") or {}
            html = data.get("text/html", "")
            if not isinstance(html, str):
                html = "".join(html)  # nbformat allows a list of lines
            if WIDGET_VIEW in data and MARKER in html:
                view = data.pop(WIDGET_VIEW)
                left = _left_image(states, view.get("model_id") if isinstance(view, dict)
                                   else None)
                if left:  # the image where the sliders were left, for the one at the defaults
                    html, found = re.subn(r'src="data:image/png;base64,[^"]*"',
                                          f'src="data:image/png;base64,{left}"', html, count=1)
                    if found:
                        data["text/html"] = html.replace(AT_DEFAULTS, WHERE_LEFT)
                        data["image/png"] = left
                        plain = data.get("text/plain", "")
                        if isinstance(plain, str):
                            data["text/plain"] = plain.replace(AT_DEFAULTS, WHERE_LEFT)
    if isinstance(widgets, dict) and WIDGET_STATE in widgets:
        del widgets[WIDGET_STATE]  # only for this hook: no widget view is saved to use it
        if not widgets:
            del metadata["widgets"]


def refresh_git_index(os_path=None, **_kwargs):
    """After a save: if git sees no change in the notebook through its filter, restage it.

    Args:
        os_path: the file just written. Anything but a notebook that git tracks,
            in a clone whose ``git diff`` finds it unchanged, is left alone; git
            missing or failing leaves it alone too (the save has happened).
    """
    import os
    import subprocess

    if not os_path or not str(os_path).endswith(".ipynb"):
        return
    directory, name = os.path.split(os.path.abspath(os_path))

    def git(*args):
        return subprocess.run(["git", *args], cwd=directory, capture_output=True,
                              timeout=60, check=False).returncode

    try:
        if git("ls-files", "--error-unmatch", "--", name) != 0:
            return  # untracked, or not in a clone
        if git("diff", "--quiet", "--no-ext-diff", "--no-textconv", "--", name) == 0:
            git("add", "--", name)  # the same blob: only the stat data change
    except (OSError, subprocess.SubprocessError):
        return


if "c" in globals():  # loaded by Jupyter as a configuration file
    import warnings

    # The server applies this setting twice and warns that the hook replaces itself.
    warnings.filterwarnings("ignore", message=r"Overriding existing pre_save_hook "
                            r"\(strip_widget_views\)")
    c.ContentsManager.pre_save_hook = strip_widget_views  # noqa: F821
    c.FileContentsManager.post_save_hook = refresh_git_index  # noqa: F821
    # No news feed and no update check: nothing to ask the reader about, and
    # nothing fetched from the internet (JupyterLab's LabApp.news_url, "set to
    # None to turn off fetching announcements", and its documented
    # NeverCheckForUpdate class).
    c.LabApp.news_url = None  # noqa: F821
    c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"  # noqa: F821
