"""CGC 0.6.13's writer statements as the driver's unit tests feed them to
the recording driver (the text of `codegraphcontext/tools/indexing/
persistence/writer.py`, with its indentation: the driver recognises them
by shape, `cgc_seam.py`). One copy for every test file that needs them.

(Not a test file: `unittest discover` imports only `test_*.py`.)"""

FILE_STATEMENT = """
                MERGE (f:File {path: $path})
                SET f.name = $name, f.relative_path = $relative_path, f.is_dependency = $is_dependency,
                    f.language = $language
            """

DIRECTORY_STATEMENT = """
                    MATCH (p:`{label}` {{path: $parent_path}})
                    MERGE (d:Directory {{path: $current_path}})
                    SET d.name = $part
                    MERGE (p)-[:CONTAINS]->(d)
                """

FILE_CONTAINED_STATEMENT = """
                MATCH (p:`{label}` {{path: $parent_path}})
                MATCH (f:File {{path: $path}})
                MERGE (p)-[:CONTAINS]->(f)
            """

NODES_STATEMENT = """
                    UNWIND $batch AS row
                    MERGE (n:{label} {{name: row.name, path: $file_path, line_number: row.line_number, """ \
    """occurrence_index: row.occurrence_index}})
                    SET n += row
                """

CONTAINED_STATEMENT = """
                    UNWIND $batch AS row
                    MATCH (f:File {{path: $file_path}})
                    MATCH (n:{label} {{name: row.name, path: $file_path, line_number: row.line_number, """ \
    """occurrence_index: row.occurrence_index}})
                    MERGE (f)-[:CONTAINS]->(n)
                """

PARAMETERS_STATEMENT = """
                    UNWIND $batch AS row
                    MATCH (fn:Function {name: row.func_name, path: $file_path, line_number: row.line_number, """ \
    """occurrence_index: row.occurrence_index})
                    MERGE (p:Parameter {name: row.arg_name, path: $file_path, function_line_number: row.line_number})
                    SET p.name = row.arg_name, p.path = $file_path, p.function_line_number = row.line_number
                    MERGE (fn)-[:HAS_PARAMETER]->(p)
                """

METHODS_STATEMENT = """
                            UNWIND $batch AS row
                            MATCH (c:{label} {{name: row.class_name, path: $file_path}})
                            MATCH (fn:Function {{name: row.func_name, path: $file_path, line_number: row.func_line}})
                            WHERE row.class_line < 0 OR c.line_number = row.class_line
                            MERGE (c)-[:CONTAINS]->(fn)
                            """

PY_IMPORTS_STATEMENT = """
                    UNWIND $batch AS row
                    MATCH (f:File {path: $file_path})
                    MERGE (m:Module {name: row.name})
                    SET m.lang = coalesce(m.lang, row.lang),
                        m.full_import_name = coalesce(m.full_import_name, row.full_import_name)
                    MERGE (f)-[r:IMPORTS {line_number: row.line_number, imported_name: row.imported_name}]->(m)
                    SET r.alias = coalesce(row.alias, ""),
                        r.full_import_name = row.full_import_name,
                        r.lang = row.lang
                """

NAME_ONLY_STATEMENT = """
                    UNWIND $batch AS row
                    MERGE (n:Module {name: row.name})
                    SET n += row
                """

# A JavaScript/TypeScript file's import rows (`js_imports`): one IMPORTS
# edge per (module, line), whatever name each row imports.
JS_IMPORTS_STATEMENT = """
                    UNWIND $batch AS row
                    MATCH (f:File {path: $file_path})
                    MERGE (m:Module {name: row.module_name})
                    MERGE (f)-[r:IMPORTS {line_number: row.line_number}]->(m)
                    SET r.imported_name = row.imported_name,
                        r.alias = row.alias,
                        r.lang = row.lang
                """

# `write_function_call_groups`' two call statements (`{where_clause}`: a
# line predicate and a context predicate joined as CGC joins them, or
# fewer), formatted with `str.format`.
CALL_BY_POSITION_STATEMENT = """
                            UNWIND $batch AS row
                            MATCH (caller:{caller_label} {{name: row.caller_name, path: row.caller_file_path, """ \
    """line_number: row.caller_line_number}})
                            MATCH (called:{called_label} {{name: row.called_name, path: row.called_file_path}})
                            {where_clause}
                            MERGE (caller)-[call:{relation_label} {{line_number: row.line_number, """ \
    """full_call_name: row.full_call_name, args_key: row.args_key}}]->(called)
                            SET call.args = row.args
                            SET call.confidence = row.confidence
                            SET call.resolution_tier = row.resolution_tier
                            SET call.confidence_label = row.confidence_label
                        """

CALL_FROM_FILE_STATEMENT = CALL_BY_POSITION_STATEMENT.replace(
    "MATCH (caller:{caller_label} {{name: row.caller_name, path: row.caller_file_path, "
    "line_number: row.caller_line_number}})",
    "MATCH (caller:File {{path: row.caller_file_path}})",
)

CALL_WHERE_LINE = "(row.called_line_number <= 0 OR called.line_number = row.called_line_number)"
CALL_WHERE_CONTEXT = (
    '(row.called_context = "" OR row.called_context IS NULL '
    "OR called.context = row.called_context "
    "OR called.class_context = row.called_context "
    "OR called.module_context = row.called_context)"
)
CALL_WHERE_JOIN = "\n                              AND "
