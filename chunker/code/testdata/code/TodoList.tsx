import React, { useCallback, useMemo, useState } from "react";

export interface Todo {
  id: number;
  title: string;
  done: boolean;
}

type Filter = "all" | "open" | "done";

const FILTERS: Filter[] = ["all", "open", "done"];

let nextId = 1;

/** A single row: a checkbox, the title, and a delete button. */
function TodoItem({
  todo,
  onToggle,
  onDelete,
}: {
  todo: Todo;
  onToggle: (id: number) => void;
  onDelete: (id: number) => void;
}) {
  return (
    <li className={todo.done ? "todo done" : "todo"}>
      <label>
        <input type="checkbox" checked={todo.done} onChange={() => onToggle(todo.id)} />
        {todo.title}
      </label>
      <button aria-label={`Delete ${todo.title}`} onClick={() => onDelete(todo.id)}>
        ×
      </button>
    </li>
  );
}

export function useTodos(initial: Todo[] = []) {
  const [todos, setTodos] = useState<Todo[]>(initial);

  const add = useCallback((title: string) => {
    const trimmed = title.trim();
    if (trimmed === "") {
      return;
    }
    setTodos((list) => [...list, { id: nextId++, title: trimmed, done: false }]);
  }, []);

  const toggle = useCallback((id: number) => {
    setTodos((list) => list.map((t) => (t.id === id ? { ...t, done: !t.done } : t)));
  }, []);

  const remove = useCallback((id: number) => {
    setTodos((list) => list.filter((t) => t.id !== id));
  }, []);

  return { todos, add, toggle, remove };
}

export default function TodoList({ initial }: { initial?: Todo[] }) {
  const { todos, add, toggle, remove } = useTodos(initial);
  const [draft, setDraft] = useState("");
  const [filter, setFilter] = useState<Filter>("all");

  const visible = useMemo(
    () => todos.filter((t) => filter === "all" || (filter === "done") === t.done),
    [todos, filter],
  );

  // Submitting the form adds the draft and clears the field.
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    add(draft);
    setDraft("");
  };

  return (
    <section className="todo-list">
      <form onSubmit={submit}>
        <input value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="What needs doing?" />
        <button type="submit">Add</button>
      </form>
      <nav>
        {FILTERS.map((f) => (
          <button key={f} disabled={f === filter} onClick={() => setFilter(f)}>
            {f}
          </button>
        ))}
      </nav>
      <ul>
        {visible.map((todo) => (
          <TodoItem key={todo.id} todo={todo} onToggle={toggle} onDelete={remove} />
        ))}
      </ul>
      <p>{todos.filter((t) => !t.done).length} left</p>
    </section>
  );
}
