"""Names vulture cannot see used: frameworks call them by name or by protocol.

`make lint` runs `vulture` with the settings in pyproject.toml ([tool.vulture]): runbook step
classes (`@action`), Textual handlers (`@on`, `@work`, `on_*`, `action_*`, `key_*`) and pytest
fixtures are skipped there by decorator or name; the rest is listed here, one group a line of
comment. A name belongs here only when something outside our code reads it.
"""

# ruff: noqa: B018, F821
# mypy: ignore-errors

# io.RawIOBase: BufferedReader/BufferedWriter call these on our raw streams.
_.readinto
_.writable

# tarfile.TarFile: the member class it instantiates for each header.
_.tarinfo

# paramiko.MissingHostKeyPolicy: SSHClient calls it for a host it has no key for.
_.missing_host_key

# http.server / socketserver: class attributes and handler methods the server looks up.
_.daemon_threads
_.allow_reuse_address
_.request_queue_size
_.protocol_version
_.log_message
_.date_time_string
_.close_connection
_.do_GET
_.do_PATCH
_.do_DELETE
_.do_POST
_.do_PUT

# contextlib protocol: __exit__ receives the exception triple whether it reads it or not.
_.exc_type
_.tb

# Textual: class attributes, overridden hooks and internal fields a DataTable subclass keeps.
_.BINDINGS
_.DEFAULT_CSS
_.CSS_PATH
_.CSS
_.cursor_blink
_.TITLE
_.check_action
_.render_line
_.discover
_.theme
_.virtual_size
_._require_update_dimensions
_._update_count

# Public accessors of the app's state, for Pilot tests and scripts driving the app.
_.detail_node
_.shown_text

# The simulator's instance catalogue keeps the list price beside each type's shape.
_.hourly_usd

# pytest: module marks and hooks it reads by name; fixtures requested only for their effect.
_.pytestmark
_.pytest_configure
_.pytest_collection_modifyitems
_.pytest_ignore_collect
_.fake_aws

# tests/gpu: the profile table mirrors fake_nvml.c's H100_PROFILES column for column.
_.ce
_.dec
_.jpg

# textual.widgets.DataTable: Column.content_width is read by the table's own layout.
_.content_width

# PEP 562: the interpreter calls a module's __getattr__ for a name it does not define.
__getattr__

# Textual reactives: `validate_<name>` is called on every assignment of the app's title and
# sub_title (textual/reactive.py); the app shows them inert.
_.validate_title
_.validate_sub_title
# textual.app.App.error_console: Textual prints a crash's traceback through it.
_.error_console

# argparse.Action.__call__: argparse passes the option string as it was typed.
_.option_string

# kubernetes.client.Configuration: get_api_key_with_prefix calls this before each request.
_.refresh_api_key_hook
