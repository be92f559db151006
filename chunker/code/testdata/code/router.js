// A tiny client-side router: maps URL paths to view functions and keeps the
// browser history in step.
'use strict';

import { render } from './render.js';

const DEFAULT_TITLE = 'Home';

/**
 * Compiles a route pattern such as "/users/:id" into a regular expression
 * and the names of its parameters.
 */
export function compile(pattern) {
  const names = [];
  const source = pattern
    .split('/')
    .map((part) => {
      if (part.startsWith(':')) {
        names.push(part.slice(1));
        return '([^/]+)';
      }
      return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return { regexp: new RegExp(`^${source}/?$`), names };
}

export class Router {
  #routes = [];
  #notFound = () => render('<h1>Not found</h1>');

  constructor(root = document.body) {
    this.root = root;
    window.addEventListener('popstate', () => this.resolve(location.pathname));
  }

  /** Registers a view for a pattern; returns the router for chaining. */
  on(pattern, view, title = DEFAULT_TITLE) {
    this.#routes.push({ ...compile(pattern), view, title });
    return this;
  }

  otherwise(view) {
    this.#notFound = view;
    return this;
  }

  navigate(path) {
    if (path === location.pathname) {
      return;
    }
    history.pushState({}, '', path);
    this.resolve(path);
  }

  resolve(path) {
    for (const route of this.#routes) {
      const match = route.regexp.exec(path);
      if (!match) {
        continue;
      }
      const params = {};
      route.names.forEach((name, i) => {
        params[name] = decodeURIComponent(match[i + 1]);
      });
      document.title = route.title;
      return route.view(params, this.root);
    }
    return this.#notFound(path, this.root);
  }
}

export const link = (router) => (event) => {
  const anchor = event.target.closest('a[href^="/"]');
  if (anchor) {
    event.preventDefault();
    router.navigate(anchor.getAttribute('href'));
  }
};

function* segments(path) {
  for (const part of path.split('/')) {
    if (part) yield part;
  }
}

export default function start(routes) {
  const router = new Router();
  for (const [pattern, view] of Object.entries(routes)) {
    router.on(pattern, view);
  }
  document.addEventListener('click', link(router));
  router.resolve(location.pathname);
  return router;
}

export { segments };
